#!/bin/sh
# tools/deb-src-twins on the shapes of apt sources Debian machines have: a comment between
# Types and URIs (debootstrap's and cloud images' deb822 files), several types on one line, a
# paragraph that is deb-src already, one-line files with options.  Run with the machine's awk
# (Debian's default is mawk) and, when installed, with gawk and busybox awk too.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cat >"$work/debian.sources" <<'SRC'
Types: deb
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb-src
URIs: http://only-source.example/debian
Suites: bookworm
Components: main

Types: deb deb-src
URIs: http://both.example/debian
Suites: trixie
Components: main
SRC
cat >"$work/expected.sources" <<'SRC'
Types: deb-src
# http://snapshot.debian.org/archive/debian/20250520T000000Z
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main

Types: deb-src
URIs: http://both.example/debian
Suites: trixie
Components: main

SRC
cat >"$work/one.list" <<'SRC'
deb http://mirror.example/debian bookworm main
  deb [arch=amd64] http://opt.example/debian bookworm main
deb-src http://mirror.example/debian bookworm main
# deb http://commented.example/debian bookworm main
SRC
cat >"$work/expected.list" <<'SRC'
deb-src http://mirror.example/debian bookworm main
deb-src [arch=amd64] http://opt.example/debian bookworm main
SRC
failed=0
mkdir -p "$work/bin"
for awk in awk gawk mawk "busybox awk"; do
    set -- $awk
    path=$(command -v "$1") || continue
    shift
    printf '#!/bin/sh\nexec %s %s "$@"\n' "$path" "$*" >"$work/bin/awk"
    chmod 755 "$work/bin/awk"
    PATH="$work/bin:$PATH" sh "$here/tools/deb-src-twins" deb822 "$work/debian.sources" >"$work/out.sources"
    if cmp -s "$work/out.sources" "$work/expected.sources"; then
        echo "ok - deb822 twins with $awk"
    else
        echo "not ok - deb822 twins with $awk:"; diff "$work/expected.sources" "$work/out.sources" || true; failed=1
    fi
done
sh "$here/tools/deb-src-twins" one-line "$work/one.list" >"$work/out.list"
if cmp -s "$work/out.list" "$work/expected.list"; then
    echo "ok - one-line twins"
else
    echo "not ok - one-line twins:"; diff "$work/expected.list" "$work/out.list" || true; failed=1
fi
exit $failed
