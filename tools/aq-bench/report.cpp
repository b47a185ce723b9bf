// aq-bench report: CSV -> gnuplot data files + script -> PNG charts. See report.hpp.
#include "report.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace aqbench {

// ---------------------------------------------------------------- CSV

const std::vector<std::string>& known_columns() {
    // clang-format off
    static const std::vector<std::string> columns = {
        "workload", "system", "producers", "consumers", "batch", "payload_bytes", "messages", "seconds",
        "enq_rate", "deq_rate", "p50_ms", "p99_ms", "max_ms", "lost", "duplicated", "unexpected",
        "recovered", "mode", "tps", "wal_syncs_per_commit", "rows_ack_rate", "rows_applied_rate", "visibility",
        "immediate_enq_unconfirmed", "immediate_deq_unconfirmed", "immediate_dequeues_unknown", "lost_in_flight"};
    // clang-format on
    return columns;
}

const std::vector<std::string>& required_columns() {
    static const std::vector<std::string> columns = {"workload", "system"};
    return columns;
}

namespace {

const std::set<std::string> text_columns = {"workload", "system", "mode", "recovered", "visibility"};

std::string trim(const std::string& s) {
    const auto first = s.find_first_not_of(" \t\r\n");
    if (first == std::string::npos) return "";
    return s.substr(first, s.find_last_not_of(" \t\r\n") - first + 1);
}

std::vector<std::string> split_fields(const std::string& line) {
    std::vector<std::string> fields;
    std::stringstream ss(line);
    std::string field;
    while (std::getline(ss, field, ',')) fields.push_back(trim(field));
    if (!line.empty() && line.back() == ',') fields.push_back("");  // getline drops a trailing empty field
    return fields;
}

bool contains(const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

std::string Run::str(const std::string& column) const {
    auto it = text.find(column);
    return it == text.end() ? "" : it->second;
}

std::optional<double> Run::num(const std::string& column) const {
    auto it = number.find(column);
    if (it == number.end()) return std::nullopt;
    return it->second;
}

std::vector<Run> parse_csv(std::istream& in, const std::string& source) {
    auto fail = [&](int line_no, const std::string& what) {
        throw std::runtime_error(source + " line " + std::to_string(line_no) + ": " + what);
    };
    std::string line;
    int line_no = 0;
    std::vector<std::string> header;
    while (header.empty() && std::getline(in, line)) {
        ++line_no;
        if (line_no == 1 && line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // UTF-8 BOM
        if (!trim(line).empty()) header = split_fields(line);
    }
    if (header.empty()) throw std::runtime_error(source + ": empty CSV, no header line");
    for (size_t i = 0; i < header.size(); ++i) {
        if (!contains(known_columns(), header[i])) fail(line_no, "unknown column \"" + header[i] + "\"");
        if (std::find(header.begin(), header.begin() + i, header[i]) != header.begin() + i)
            fail(line_no, "duplicate column \"" + header[i] + "\"");
    }
    for (const auto& col : required_columns())
        if (!contains(header, col)) fail(line_no, "missing required column \"" + col + "\"");

    std::vector<Run> runs;
    while (std::getline(in, line)) {
        ++line_no;
        if (trim(line).empty()) continue;
        const auto fields = split_fields(line);
        if (fields.size() != header.size())
            fail(line_no, std::to_string(fields.size()) + " fields, header has " + std::to_string(header.size()));
        Run run;
        for (size_t i = 0; i < fields.size(); ++i) {
            const std::string& col = header[i];
            const std::string& value = fields[i];
            if (value.empty()) continue;
            if (text_columns.count(col)) {
                run.text[col] = value;
                continue;
            }
            char* end = nullptr;
            const double d = std::strtod(value.c_str(), &end);
            if (end != value.c_str() + value.size() || !std::isfinite(d))
                fail(line_no, "column " + col + ": \"" + value + "\" is not a number");
            run.number[col] = d;
        }
        for (const auto& col : required_columns())
            if (run.str(col).empty()) fail(line_no, "empty " + col);
        runs.push_back(std::move(run));
    }
    return runs;
}

// ---------------------------------------------------------------- grouping

namespace {

using Rows = std::vector<const Run*>;
using Key = std::optional<double>;

Rows rows_where(const std::vector<Run>& runs, const std::string& workload, const std::vector<std::string>& needed) {
    Rows rows;
    for (const auto& r : runs)
        if (r.str("workload") == workload &&
            std::all_of(needed.begin(), needed.end(), [&](const std::string& c) { return r.num(c).has_value(); }))
            rows.push_back(&r);
    return rows;
}

Rows filter(const Rows& rows, const std::function<bool(const Run&)>& keep) {
    Rows out;
    for (const Run* r : rows)
        if (keep(*r)) out.push_back(r);
    return out;
}

// `preferred` if some row has it, else the most common key (ties: the smallest).
template <class K>
K preferred_or_most_common(const Rows& rows, const K& preferred, const std::function<K(const Run&)>& key) {
    std::map<K, int> count;
    for (const Run* r : rows) ++count[key(*r)];
    if (count.count(preferred) || count.empty()) return preferred;
    return std::max_element(count.begin(), count.end(),
                            [](const auto& a, const auto& b) { return a.second < b.second; })
        ->first;
}

// Values of a text column (or of value_of): the `preferred` ones present, in that order, then the others as they
// appear.
std::vector<std::string> ordered_values(const Rows& rows, const std::function<std::string(const Run&)>& value_of,
                                        const std::vector<std::string>& preferred) {
    std::vector<std::string> seen, out;
    for (const Run* r : rows)
        if (!contains(seen, value_of(*r))) seen.push_back(value_of(*r));
    for (const auto& p : preferred)
        if (contains(seen, p)) out.push_back(p);
    for (const auto& s : seen)
        if (!contains(out, s)) out.push_back(s);
    return out;
}

std::vector<std::string> ordered_values(const Rows& rows, const std::string& column,
                                        const std::vector<std::string>& preferred) {
    return ordered_values(rows, [&](const Run& r) { return r.str(column); }, preferred);
}

std::string format_number(double d) {
    std::ostringstream os;
    os << d;
    return os.str();
}

std::string format_key(const Key& k) { return k ? format_number(*k) : "?"; }

// Mean of ycol per x over `rows`; rows without an x (x_of gives nullopt), without ycol or, on a log y axis,
// with y <= 0 are skipped.
Series mean_series(const std::string& name, const Rows& rows, const std::function<Key(const Run&)>& x_of,
                   const std::string& ycol, bool logy = false) {
    std::map<double, std::pair<double, int>> sum_and_count;
    for (const Run* r : rows) {
        const Key x = x_of(*r), y = r->num(ycol);
        if (!x || !y || (logy && *y <= 0)) continue;
        sum_and_count[*x].first += *y;
        sum_and_count[*x].second += 1;
    }
    Series s;
    s.name = name;
    for (const auto& [x, sc] : sum_and_count) s.points.push_back({x, sc.first / sc.second});
    return s;
}

// A line: x from a numeric column (> 0 on a log x axis).
Series line_series(const std::string& name, const Rows& rows, const std::string& xcol, const std::string& ycol,
                   bool logx, bool logy) {
    auto x_of = [&](const Run& r) { return logx && r.num(xcol) <= 0.0 ? Key{} : r.num(xcol); };
    return mean_series(name, rows, x_of, ycol, logy);
}

// Bars: x = index in `categories` of the row's category (category_of).
Series bar_series(const std::string& name, const Rows& rows, const std::function<std::string(const Run&)>& category_of,
                  const std::vector<std::string>& categories, const std::string& ycol) {
    auto x_of = [&](const Run& r) {
        auto it = std::find(categories.begin(), categories.end(), category_of(r));
        return it == categories.end() ? Key{} : Key{double(it - categories.begin())};
    };
    return mean_series(name, rows, x_of, ycol);
}

// Bars: x = index in `categories` of the row's text column `category_col`.
Series bar_series(const std::string& name, const Rows& rows, const std::string& category_col,
                  const std::vector<std::string>& categories, const std::string& ycol) {
    return bar_series(name, rows, [&](const Run& r) { return r.str(category_col); }, categories, ycol);
}

// The distinct values of a numeric column, ascending (a missing value is nullopt, first).
std::vector<Key> distinct(const Rows& rows, const std::string& column) {
    std::set<Key> values;
    for (const Run* r : rows) values.insert(r->num(column));
    return {values.begin(), values.end()};
}

// "1 session", "8 sessions", "? sessions".
std::string counted(const Key& n, const std::string& noun) {
    return format_key(n) + " " + noun + (n == 1.0 ? "" : "s");
}

void add(Chart& chart, Series s, int color, int dash = 1, bool y2 = false) {
    if (s.points.empty()) return;
    s.color = color;
    s.dash = dash;
    s.y2 = y2;
    chart.series.push_back(std::move(s));
}

const std::vector<std::string> queue_systems = {"aq", "plain", "pgq", "aq immediate"};

Rows of_system(const Rows& rows, const std::string& system) {
    return filter(rows, [&](const Run& r) { return r.str("system") == system; });
}

// A queue run's line: its system, "aq immediate" for aq --immediate (visibility=immediate) runs.
std::string queue_line(const Run& r) {
    return r.str("visibility") == "immediate" ? r.str("system") + " immediate" : r.str("system");
}

std::vector<std::string> queue_lines(const Rows& rows) { return ordered_values(rows, queue_line, queue_systems); }

Rows of_line(const Rows& rows, const std::string& line) {
    return filter(rows, [&](const Run& r) { return queue_line(r) == line; });
}

// Queue rows restricted to producers=consumers=2 if present, else the most common pair; `label` describes it.
Rows fixed_producers_consumers(const Rows& rows, std::string& label) {
    using Pair = std::pair<Key, Key>;
    auto pair_of = [](const Run& r) { return Pair{r.num("producers"), r.num("consumers")}; };
    const Pair chosen = preferred_or_most_common<Pair>(rows, Pair{2.0, 2.0}, pair_of);
    label = "producers=" + format_key(chosen.first) + ", consumers=" + format_key(chosen.second);
    return filter(rows, [&](const Run& r) { return pair_of(r) == chosen; });
}

}  // namespace

Chart queue_batch_chart(const std::vector<Run>& runs) {
    Chart c;
    c.file = "queue_batch.png";
    c.logx = true;
    std::string fixed;
    const Rows rows = fixed_producers_consumers(rows_where(runs, "queue", {"batch", "deq_rate"}), fixed);
    c.title = "Queue throughput vs batch size (" + fixed + ")";
    c.xlabel = "batch size (messages)";
    c.ylabel = "end-to-end messages/s (dequeue rate)";
    const auto systems = queue_lines(rows);
    for (size_t i = 0; i < systems.size(); ++i)
        add(c, line_series(systems[i], of_line(rows, systems[i]), "batch", "deq_rate", true, false), int(i) + 1);
    if (c.empty()) c.skip_reason = "no workload=queue rows with batch and deq_rate";
    return c;
}

Chart queue_consumers_chart(const std::vector<Run>& runs) {
    Chart c;
    c.file = "queue_consumers.png";
    Rows rows = rows_where(runs, "queue", {"consumers", "deq_rate"});
    const Key batch = preferred_or_most_common<Key>(rows, Key{100.0}, [](const Run& r) { return r.num("batch"); });
    rows = filter(rows, [&](const Run& r) { return r.num("batch") == batch; });

    // Producers: the slice covering the most consumer counts; ties prefer producers=2, then producers=consumers.
    std::map<Key, std::set<Key>> consumers_at;  // producers -> consumer counts measured
    std::set<Key> consumers_at_equal;           // consumer counts measured with producers=consumers
    for (const Run* r : rows) {
        consumers_at[r->num("producers")].insert(r->num("consumers"));
        if (r->num("producers") == r->num("consumers")) consumers_at_equal.insert(r->num("consumers"));
    }
    Key producers = 2.0;
    bool equal_slice = false;
    size_t best = consumers_at.count(producers) ? consumers_at[producers].size() : 0;
    if (consumers_at.size() > 1 && consumers_at_equal.size() > best)
        equal_slice = true, best = consumers_at_equal.size();
    for (const auto& [p, consumers] : consumers_at)
        if (consumers.size() > best) producers = p, equal_slice = false, best = consumers.size();
    rows = filter(rows, [&](const Run& r) {
        return equal_slice ? r.num("producers") == r.num("consumers") : r.num("producers") == producers;
    });
    const std::string producers_label = equal_slice ? "producers=consumers" : "producers=" + format_key(producers);
    c.title = "Queue throughput vs consumers (batch " + format_key(batch) + ", " + producers_label + ")";
    c.xlabel = "consumers";
    c.ylabel = "end-to-end messages/s (dequeue rate)";
    const auto systems = queue_lines(rows);
    for (size_t i = 0; i < systems.size(); ++i)
        add(c, line_series(systems[i], of_line(rows, systems[i]), "consumers", "deq_rate", false, false), int(i) + 1);
    if (c.empty()) c.skip_reason = "no workload=queue rows with consumers and deq_rate";
    return c;
}

Chart queue_latency_chart(const std::vector<Run>& runs) {
    Chart c;
    c.file = "queue_latency.png";
    c.logx = c.logy = true;
    Rows rows =
        filter(rows_where(runs, "queue", {"batch"}), [](const Run& r) { return r.num("p50_ms") || r.num("p99_ms"); });
    std::string fixed;
    rows = fixed_producers_consumers(rows, fixed);
    c.title = "Queue latency vs batch size (" + fixed + ")";
    c.xlabel = "batch size (messages)";
    c.ylabel = "latency (ms, log scale)";
    const auto systems = queue_lines(rows);
    for (size_t i = 0; i < systems.size(); ++i) {
        const Rows sys = of_line(rows, systems[i]);
        add(c, line_series(systems[i] + " p50", sys, "batch", "p50_ms", true, true), int(i) + 1, 1);
        add(c, line_series(systems[i] + " p99", sys, "batch", "p99_ms", true, true), int(i) + 1, 2);
    }
    if (c.empty()) c.skip_reason = "no workload=queue rows with batch and a positive p50_ms/p99_ms";
    return c;
}

// Ingest and commit rows carry the writers / sessions in the producers column.  Runs with different
// counts are not averaged together: ingest gets a category per mode and writer count, commit a
// series per session count (a single count keeps the plain categories and names).
Chart ingest_chart(const std::vector<Run>& runs) {
    Chart c;
    c.file = "ingest.png";
    c.kind = Chart::Kind::bars;
    const Rows rows = filter(rows_where(runs, "ingest", {}),
                             [](const Run& r) { return r.num("rows_ack_rate") || r.num("rows_applied_rate"); });
    const auto writers = distinct(rows, "producers");
    c.title = "Ingest throughput: rows/s until acknowledged and until applied";
    if (writers.size() == 1) c.title += " (" + counted(writers[0], "writer") + ")";
    c.xlabel = writers.size() > 1 ? "mode, writers" : "mode";
    c.ylabel = "rows/s";
    const auto modes = ordered_values(rows, "mode", {"single", "multi"});
    std::function<std::string(const Run&)> category_of = [](const Run& r) { return r.str("mode"); };
    if (writers.size() > 1) {
        category_of = [](const Run& r) { return r.str("mode") + ", " + counted(r.num("producers"), "writer"); };
        for (const auto& mode : modes)
            for (const auto& w : writers) c.categories.push_back(mode + ", " + counted(w, "writer"));
    } else {
        c.categories = modes;
    }
    const auto systems = ordered_values(rows, "system", {"fast", "standard"});
    int color = 1;
    for (const auto& system : systems) {
        const Rows sys = of_system(rows, system);
        add(c, bar_series(system + ": until acknowledged", sys, category_of, c.categories, "rows_ack_rate"), color++);
        add(c, bar_series(system + ": until applied", sys, category_of, c.categories, "rows_applied_rate"), color++);
    }
    if (c.empty()) c.skip_reason = "no workload=ingest rows with rows_ack_rate or rows_applied_rate";
    return c;
}

Chart commit_chart(const std::vector<Run>& runs) {
    Chart c;
    c.file = "commit.png";
    c.kind = Chart::Kind::bars;
    const Rows rows = filter(rows_where(runs, "commit", {}),
                             [](const Run& r) { return r.num("wal_syncs_per_commit") || r.num("tps"); });
    const auto sessions = distinct(rows, "producers");
    c.title = "Commit modes: WAL syncs per commit and commits/s";
    if (sessions.size() == 1) c.title += " (" + counted(sessions[0], "session") + ")";
    c.xlabel = "commit mode";
    c.ylabel = "WAL syncs per commit";
    c.y2label = "commits/s (tps)";
    c.categories = ordered_values(rows, "mode", {"WAIT/IMMEDIATE", "NOWAIT/IMMEDIATE", "NOWAIT/BATCH", "WAIT/BATCH"});
    const auto systems = ordered_values(rows, "system", {"aq"});
    int color = 1;
    for (const auto& system : systems) {
        const Rows sys = of_system(rows, system);
        for (bool tps : {false, true})
            for (const auto& n : sessions) {
                const Rows slice = filter(sys, [&](const Run& r) { return r.num("producers") == n; });
                std::string prefix = systems.size() > 1 ? system + ", " : "";
                if (sessions.size() > 1) prefix += counted(n, "session") + ", ";
                if (!prefix.empty()) prefix = prefix.substr(0, prefix.size() - 2) + ": ";
                if (tps)
                    add(c, bar_series(prefix + "tps (right axis)", slice, "mode", c.categories, "tps"), color++, 1, true);
                else
                    add(c, bar_series(prefix + "WAL syncs per commit", slice, "mode", c.categories,
                                      "wal_syncs_per_commit"),
                        color++);
            }
    }
    if (c.empty()) c.skip_reason = "no workload=commit rows with wal_syncs_per_commit or tps";
    return c;
}

std::vector<Chart> build_charts(const std::vector<Run>& runs) {
    return {queue_batch_chart(runs), queue_consumers_chart(runs), queue_latency_chart(runs), ingest_chart(runs),
            commit_chart(runs)};
}

// ---------------------------------------------------------------- gnuplot

namespace {

// A gnuplot single-quoted string (no escapes inside; a quote is doubled).
std::string gp_quote(const std::string& s) {
    std::string out = "'";
    for (char ch : s) out += ch == '\'' ? std::string("''") : std::string(1, ch);
    return out + "'";
}

// A POSIX shell single-quoted word.
std::string sh_quote(const std::string& s) {
    std::string out = "'";
    for (char ch : s) out += ch == '\'' ? std::string("'\\''") : std::string(1, ch);
    return out + "'";
}

std::string data_path(const Chart& chart, const std::string& out_dir) {
    return (fs::path(out_dir) / fs::path(chart.file).replace_extension(".dat")).string();
}

void write_lines_settings(std::ostream& gp, const Chart& chart) {
    std::set<double> xs;
    for (const auto& s : chart.series)
        for (const auto& p : s.points) xs.insert(p.x);
    if (chart.logx) gp << "set logscale x 10\n";
    if (chart.logy)
        gp << "set logscale y 10\n";
    else
        gp << "set yrange [0:*]\n";
    if (xs.size() <= 12) {  // ticks exactly at the measured x values (1, 10, 100, 500 ...)
        gp << "set xtics (";
        for (auto it = xs.begin(); it != xs.end(); ++it) gp << (it == xs.begin() ? "" : ", ") << format_number(*it);
        gp << ")\n";
    }
    // A margin around the points (`set offsets` is unreliable on a log x axis, so widen its range instead).
    if (chart.logx) gp << "set xrange [" << *xs.begin() / 1.4 << ":" << *xs.rbegin() * 1.4 << "]\n";
    const std::string x_margin = chart.logx ? "0" : "graph 0.05", y_margin = chart.logy ? "graph 0.05" : "0";
    gp << "set offsets " << x_margin << ", " << x_margin << ", " << y_margin << ", " << y_margin << "\n";
}

void write_bars_settings(std::ostream& gp, const Chart& chart) {
    // Fixed ranges with 15% headroom for the value labels above the bars.
    double y1_max = 0, y2_max = 0;
    for (const auto& s : chart.series)
        for (const auto& p : s.points) (s.y2 ? y2_max : y1_max) = std::max(s.y2 ? y2_max : y1_max, p.y);
    gp << "set style fill solid 0.85 border -1\nset yrange [0:" << (y1_max > 0 ? y1_max * 1.15 : 1) << "]\n";
    if (y2_max > 0)
        gp << "set y2range [0:" << y2_max * 1.15 << "]\nset y2tics\nset ytics nomirror\nset y2label "
           << gp_quote(chart.y2label) << "\n";
    gp << "set xtics (";
    for (size_t i = 0; i < chart.categories.size(); ++i)
        gp << (i ? ", " : "") << gp_quote(chart.categories[i]) << " " << i;
    gp << ") scale 0\nset xrange [-0.6:" << chart.categories.size() - 0.4 << "]\n";
}

}  // namespace

void write_data_file(const Chart& chart, const std::string& path) {
    std::ofstream out(path);
    if (!out) throw std::runtime_error("cannot write " + path);
    out.precision(10);
    for (size_t i = 0; i < chart.series.size(); ++i) {
        out << (i ? "\n\n" : "") << "# index " << i << ": " << chart.series[i].name << "\n";
        for (const auto& p : chart.series[i].points) out << p.x << " " << p.y << "\n";
    }
    if (!out.flush()) throw std::runtime_error("cannot write " + path);
}

std::string gnuplot_script(const std::vector<Chart>& charts, const std::string& out_dir) {
    std::ostringstream gp;
    gp << "# generated by aq-bench report\n"
          "if (strstrt(GPVAL_TERMINALS.' ', ' pngcairo ') > 0) {\n"
          "  set terminal pngcairo size 800,500 noenhanced font ',10'\n"
          "} else {\n"
          "  set terminal png size 800,500 noenhanced\n"
          "}\n";
    for (const auto& chart : charts) {
        if (chart.empty()) continue;
        const std::string data = gp_quote(data_path(chart, out_dir));
        gp << "\n# ---- " << chart.file << "\nreset\n"
           << "set output " << gp_quote((fs::path(out_dir) / chart.file).string()) << "\n"
           << "set title " << gp_quote(chart.title) << "\n"
           << "set xlabel " << gp_quote(chart.xlabel) << "\n"
           << "set ylabel " << gp_quote(chart.ylabel) << "\n"
           << "set grid ytics\n"
           << (chart.kind == Chart::Kind::lines ? "set key outside right top vertical samplen 3\n"
                                                : "set key below vertical maxrows 2 samplen 2\n");
        if (chart.kind == Chart::Kind::lines)
            write_lines_settings(gp, chart);
        else
            write_bars_settings(gp, chart);

        const double width = 0.8 / chart.series.size();
        gp << "plot ";
        for (size_t i = 0; i < chart.series.size(); ++i) {
            const Series& s = chart.series[i];
            gp << (i ? ", \\\n     " : "") << data << " index " << i;
            if (chart.kind == Chart::Kind::lines) {
                const int point_type = s.dash == 1 ? 7 : 5;  // circle / square: dashes are lost on plain png
                gp << " using 1:2 with linespoints lw 2 pt " << point_type << " ps 1.2 lc " << s.color << " dt "
                   << s.dash;
            } else {
                const double offset = -0.4 + width * (i + 0.5);
                const std::string at = "($1" + std::string(offset < 0 ? "" : "+") + format_number(offset) + ")";
                const std::string axes = s.y2 ? " axes x1y2" : "";
                gp << " using " << at << ":2:(" << width << ") with boxes lc " << s.color << axes << " title "
                   << gp_quote(s.name) << ", \\\n     " << data << " index " << i << " using " << at
                   << ":2:(abs($2) >= 10000 ? sprintf('%.0fk', $2 / 1000) : sprintf(abs($2) >= 1000 ? '%.0f' : '%.3g', $2))"
                   << " with labels offset 0,0.6 font ',8'" << axes
                   << " notitle";
                continue;
            }
            gp << " title " << gp_quote(s.name);
        }
        gp << "\nunset output\n";
    }
    return gp.str();
}

std::vector<std::string> write_report(const ReportOptions& options) {
    std::ifstream csv(options.csv_path);
    if (!csv) throw std::runtime_error("cannot open CSV file \"" + options.csv_path + "\"");
    const std::vector<Run> runs = parse_csv(csv, options.csv_path);

    const fs::path out_dir = fs::absolute(options.out_dir.empty() ? "." : options.out_dir);
    std::error_code ec;
    fs::create_directories(out_dir, ec);
    if (ec) throw std::runtime_error("cannot create directory " + out_dir.string() + ": " + ec.message());

    const std::vector<Chart> charts = build_charts(runs);
    std::vector<std::string> pngs;
    for (const auto& chart : charts) {
        if (chart.empty()) {
            std::cerr << "aq-bench report: skipping " << chart.file << ": " << chart.skip_reason << "\n";
            continue;
        }
        write_data_file(chart, data_path(chart, out_dir.string()));
        pngs.push_back((out_dir / chart.file).string());
    }
    if (pngs.empty()) return pngs;

    const std::string script_path = (out_dir / "report.gp").string();
    {
        std::ofstream script(script_path);
        script << gnuplot_script(charts, out_dir.string());
        if (!script.flush()) throw std::runtime_error("cannot write " + script_path);
    }
    for (const auto& png : pngs) fs::remove(png, ec);  // so a stale chart cannot pass for a new one

    const std::string command = sh_quote(options.gnuplot) + " " + sh_quote(script_path) + " 2>&1";
    FILE* pipe = popen(command.c_str(), "r");
    if (!pipe) throw std::runtime_error("cannot run gnuplot: " + command);
    std::string output;
    char buffer[4096];
    while (size_t n = fread(buffer, 1, sizeof buffer, pipe)) output.append(buffer, n);
    const int status = pclose(pipe);
    const int code = status == -1 ? -1 : WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (code == 126 || code == 127)
        throw std::runtime_error("gnuplot not found or not executable (\"" + options.gnuplot +
                                 "\"); install the Debian package gnuplot-nox");
    if (code != 0)
        throw std::runtime_error("gnuplot failed (exit status " + std::to_string(code) + ") on " + script_path +
                                 (output.empty() ? "" : ":\n" + output));
    if (!output.empty()) std::cerr << "aq-bench report: gnuplot says:\n" << output;
    for (const auto& png : pngs)
        if (!fs::exists(png) || fs::file_size(png, ec) == 0)
            throw std::runtime_error("gnuplot did not write " + png + " (see " + script_path + ")");
    return pngs;
}

}  // namespace aqbench
