# aq — PGXS build. `make && sudo make install`; `bash tools/run test` runs every suite.
EXTENSION   = aq
MODULE_big  = aq
DATA        = sql/aq--0.7.0.sql sql/aq--0.1.0.sql sql/aq--0.1.0--0.2.0.sql sql/aq--0.2.0--0.3.0.sql sql/aq--0.3.0--0.4.0.sql sql/aq--0.4.0--0.5.0.sql sql/aq--0.5.0--0.6.0.sql sql/aq--0.6.0--0.7.0.sql
PGFILEDESC  = "aq - Oracle-style Advanced Queuing for PostgreSQL"

OBJS = \
	src/base/guard.o \
	src/base/multi_insert.o \
	src/base/run_as.o \
	src/base/spi.o \
	src/base/statement.o \
	src/base/xact_end.o \
	src/commit/committer.o \
	src/commit/log_writer.o \
	src/commit/mode.o \
	src/commit/settings.o \
	src/ingest/drain.o \
	src/ingest/hint.o \
	src/ingest/ring.o \
	src/ingest/settings.o \
	src/ingest/watermarks.o \
	src/ingest/writer.o \
	src/pg/commit_functions.o \
	src/pg/ingest_functions.o \
	src/pg/module.o \
	src/pg/queue_functions.o \
	src/pg/retry_functions.o \
	src/pg/wait_time.o \
	src/queue/audience.o \
	src/queue/bulk_dequeue.o \
	src/queue/bulk_enqueue.o \
	src/queue/catalog.o \
	src/queue/condition.o \
	src/queue/deliveries_statements.o \
	src/queue/delivery_walk.o \
	src/queue/dequeue.o \
	src/queue/enqueue.o \
	src/queue/fanout.o \
	src/queue/group_walk.o \
	src/queue/groups.o \
	src/queue/immediate.o \
	src/queue/immediate_worker.o \
	src/queue/index_walk.o \
	src/queue/listen.o \
	src/queue/maintenance.o \
	src/queue/navigation.o \
	src/queue/once_walk.o \
	src/queue/options.o \
	src/queue/plan_cache.o \
	src/queue/retention.o \
	src/queue/retries.o \
	src/queue/ring.o \
	src/queue/scan_floor.o \
	src/queue/settle.o \
	src/queue/settler.o \
	src/queue/settler_shared.o \
	src/queue/statements.o \
	src/queue/time_manager.o \
	src/queue/sweep.o \
	src/queue/sweep_walk.o \
	src/queue/waiting.o \
	src/queue/wakeup.o

# pg_regress: sql/<name>.sql against expected/<name>.out
REGRESS      = setup walkthrough enqueue dequeue errors names waiting queue_options queue_admin bulk_dequeue multi_insert dequeue_paths retries commit_modes guc_memory ingest ingest_xact owner_run ingest_owner_run deq_condition listen subscribers groups group_cache array_limits consumer_info claims_flush immediate extension_schema health ring_storage ring floor_horizon retention stored_once
# Every suite starts its own throwaway server (--temp-instance) with aq preloaded.
REGRESS_OPTS = --temp-instance=$(CURDIR)/tmp_regress --temp-config=test/aq.conf --load-extension=aq
# isolation specs: test/specs/<name>.spec against test/expected/<name>.out
ISOLATION      = skip_locked rollback_returns attempts_sessions enqueue_visibility wait_wakeup ingest_flush browse_remove locked_remove navigation_concurrent delay_wakeup priority_consumers scan_floor listen_wakeup subscribers subscriber_removal groups subscriber_removal_snapshot group_retry_delay release_wakeup group_locks left_behind navigation_positions rollback_returns_levels priority_consumers_levels navigation_concurrent_levels scan_floor_levels scan_floor_serializable locked_remove_levels subscribers_levels immediate_visibility horizon_floor wait_horizon ring_order ring_carry ring_groups ring_browse retention_levels once_claim
ISOLATION_OPTS = --inputdir=test --temp-instance=$(CURDIR)/tmp_isolation --temp-config=test/aq.conf --load-extension=aq
# Perl TAP (PostgreSQL::Test::Cluster)
TAP_TESTS   = 1
PROVE_TESTS = test/t/*.pl

PG_CPPFLAGS  = -I$(srcdir)/src
# -MMD -MP: each object also records the headers it includes (src/**/*.d), so a changed
# header (a shared-memory layout, say) rebuilds every object that uses it.
PG_CXXFLAGS  = -std=c++17 -Wno-register -fno-strict-aliasing -Wall -Wextra -Wno-unused-parameter -Wno-missing-field-initializers -MMD -MP
SHLIB_LINK  += -lstdc++
# bash tools/run checked: AQ_SANITIZE='-fsanitize=address,undefined ...' (empty otherwise)
PG_CXXFLAGS += $(AQ_SANITIZE)
SHLIB_LINK  += $(AQ_SANITIZE)

# Debian's server is built with LLVM; skip bitcode so clang is not a build dependency.
override with_llvm = no

# (Before the include: pgxs.mk tests it with ifdef when it is read.)
EXTRA_CLEAN = $(OBJS:.o=.d) test/unit/options_test test/unit/commit_mode_test test/unit/hint_test test/unit/seqid_test test/unit/recipients_test test/unit/rules_test test/unit/once_a_second_test test/unit/sweep_rules_test test/unit/txn_local_test test/unit/checker_test test/unit/report_test test/unit/aq_bench_cli_test tools/aq-bench/aq-bench tools/bench/queue-bench results output_iso tmp_check tmp_regress \
	tmp_isolation tmp_pgtap tmp_demo regression.diffs regression.out

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)
-include $(OBJS:.o=.d)

# One suite at a time (tools/run test reports each); `make installcheck` runs all three.
installcheck-regress:
	$(pg_regress_installcheck) $(REGRESS_OPTS) $(REGRESS)
installcheck-isolation:
	$(pg_isolation_regress_installcheck) $(ISOLATION_OPTS) $(ISOLATION)
installcheck-tap:
	$(prove_installcheck)
.PHONY: installcheck-regress installcheck-isolation installcheck-tap

# The queue benchmark (a libpq client; not part of the extension).
tools/bench/queue-bench: tools/bench/queue_bench.cpp
	$(CXX) -std=c++17 -O2 -Wall -I$(shell $(PG_CONFIG) --includedir) -o $@ $< -L$(shell $(PG_CONFIG) --libdir) -lpq

# aq-bench: the libpq load driver (tools/aq-bench; Boost.Program_options).
AQ_BENCH_SRCS = tools/aq-bench/main.cpp tools/aq-bench/cli.cpp tools/aq-bench/pg.cpp tools/aq-bench/faults.cpp \
	tools/aq-bench/queue_workload.cpp tools/aq-bench/other_workloads.cpp tools/aq-bench/checker.cpp tools/aq-bench/report.cpp
tools/aq-bench/aq-bench: $(AQ_BENCH_SRCS) $(wildcard tools/aq-bench/*.hpp)
	$(CXX) -std=c++17 -O2 -Wall -Wextra -I$(shell $(PG_CONFIG) --includedir) -Itools/aq-bench -o $@ $(AQ_BENCH_SRCS) \
		-L$(shell $(PG_CONFIG) --libdir) -lpq -lboost_program_options -pthread

# Unit tests of the pure C++ pieces (no PostgreSQL headers): Boost.Test.
UNIT_SRCS = test/unit/options_test.cpp src/queue/options.cpp
test/unit/options_test: $(UNIT_SRCS) src/queue/options.hpp src/common/error.hpp
	$(CXX) -std=c++17 -O1 -Wall -I$(srcdir)/src -o $@ $(UNIT_SRCS)

test/unit/commit_mode_test: test/unit/commit_mode_test.cpp src/commit/mode.cpp src/commit/mode.hpp src/common/error.hpp
	$(CXX) -std=c++17 -O1 -Wall -I$(srcdir)/src -o $@ test/unit/commit_mode_test.cpp src/commit/mode.cpp

test/unit/hint_test: test/unit/hint_test.cpp src/ingest/hint.cpp src/ingest/hint.hpp
	$(CXX) -std=c++17 -O1 -Wall -I$(srcdir)/src -o $@ test/unit/hint_test.cpp src/ingest/hint.cpp

test/unit/recipients_test: test/unit/recipients_test.cpp src/queue/recipients.hpp
	$(CXX) -std=c++17 -O1 -Wall -I$(srcdir)/src -o $@ test/unit/recipients_test.cpp

test/unit/rules_test: test/unit/rules_test.cpp src/queue/rules.hpp
	$(CXX) -std=c++17 -O1 -Wall -I$(srcdir)/src -o $@ test/unit/rules_test.cpp

test/unit/once_a_second_test: test/unit/once_a_second_test.cpp src/base/once_a_second.hpp
	$(CXX) -std=c++17 -O1 -Wall -I$(srcdir)/src -o $@ test/unit/once_a_second_test.cpp

test/unit/sweep_rules_test: test/unit/sweep_rules_test.cpp src/queue/sweep_rules.hpp
	$(CXX) -std=c++17 -O1 -Wall -I$(srcdir)/src -o $@ test/unit/sweep_rules_test.cpp

test/unit/txn_local_test: test/unit/txn_local_test.cpp src/base/txn_local_core.hpp
	$(CXX) -std=c++17 -O1 -Wall -I$(srcdir)/src -o $@ test/unit/txn_local_test.cpp

test/unit/seqid_test: test/unit/seqid_test.cpp src/ingest/seqid.hpp
	$(CXX) -std=c++17 -O1 -Wall -I$(srcdir)/src -o $@ test/unit/seqid_test.cpp

# aq-bench's pure parts: the exactly-once checker, the report, the command line.
test/unit/checker_test: test/unit/checker_test.cpp tools/aq-bench/checker.cpp tools/aq-bench/checker.hpp
	$(CXX) -std=c++17 -O1 -Wall -Itools/aq-bench -o $@ test/unit/checker_test.cpp tools/aq-bench/checker.cpp -pthread
test/unit/report_test: test/unit/report_test.cpp tools/aq-bench/report.cpp tools/aq-bench/report.hpp
	$(CXX) -std=c++17 -O1 -Wall -Itools/aq-bench -o $@ test/unit/report_test.cpp tools/aq-bench/report.cpp
test/unit/aq_bench_cli_test: test/unit/aq_bench_cli_test.cpp tools/aq-bench/cli.cpp tools/aq-bench/cli.hpp tools/aq-bench/other_workloads.hpp
	$(CXX) -std=c++17 -O1 -Wall -Itools/aq-bench -I$(shell $(PG_CONFIG) --includedir) -o $@ \
		test/unit/aq_bench_cli_test.cpp tools/aq-bench/cli.cpp -lboost_program_options

unitcheck: test/unit/options_test test/unit/commit_mode_test test/unit/hint_test test/unit/seqid_test test/unit/recipients_test test/unit/rules_test test/unit/once_a_second_test test/unit/sweep_rules_test test/unit/txn_local_test \
		test/unit/checker_test test/unit/report_test test/unit/aq_bench_cli_test
	./test/unit/options_test
	./test/unit/commit_mode_test
	./test/unit/hint_test
	./test/unit/seqid_test
	./test/unit/recipients_test
	./test/unit/rules_test
	./test/unit/once_a_second_test
	./test/unit/sweep_rules_test
	./test/unit/txn_local_test
	./test/unit/checker_test
	./test/unit/report_test
	./test/unit/aq_bench_cli_test

.PHONY: unitcheck
# The PGXN distribution: aq-<version>.zip of the committed tree (HEAD), every file under
# aq-<version>/; tools/check-dist builds and installs it from nothing but PGXS.
AQ_VERSION = $(shell sed -n "s/^default_version *= *'\([^']*\)'.*/\1/p" $(srcdir)/aq.control)
dist:
	git -C $(srcdir) archive --format=zip --prefix=$(EXTENSION)-$(AQ_VERSION)/ -o $(CURDIR)/$(EXTENSION)-$(AQ_VERSION).zip HEAD
	@echo $(EXTENSION)-$(AQ_VERSION).zip
.PHONY: dist
