// aq-bench report: turns the --csv results (format in /work/notes/aq_bench_design.md) into PNG charts
// drawn by gnuplot (Debian package gnuplot-nox). Only the C++ standard library; gnuplot runs via popen.
#pragma once

#include <iosfwd>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace aqbench {

struct ReportOptions {
    std::string csv_path;
    std::string out_dir;
    std::string gnuplot = "gnuplot";
};

// Reads the CSV, writes data files and a gnuplot script (report.gp) into out_dir, runs gnuplot, returns
// the PNG paths written. Charts without data are skipped with a note on stderr. Throws std::runtime_error
// on a missing/invalid CSV, an unknown column, or gnuplot failing / missing.
std::vector<std::string> write_report(const ReportOptions&);

// ---- pure parts (unit-tested) ----

// One measured run (one CSV row). Empty fields are simply absent.
struct Run {
    std::map<std::string, std::string> text;                     // workload, system, mode, recovered
    std::map<std::string, double> number;                        // every other column
    std::string str(const std::string& column) const;            // "" when absent
    std::optional<double> num(const std::string& column) const;  // nullopt when absent
};

// Columns the CSV may contain (any order, any subset containing the required ones).
const std::vector<std::string>& known_columns();
const std::vector<std::string>& required_columns();  // workload, system

// Header-driven parse. Skips blank lines, accepts CRLF, trims spaces. Throws std::runtime_error naming
// `source` and the line on an unknown/duplicate/missing required column, a wrong field count, an empty
// workload or system, or a value that is not a finite number in a numeric column.
std::vector<Run> parse_csv(std::istream& in, const std::string& source = "CSV");

struct Point {
    double x, y;
};
struct Series {
    std::string name;
    std::vector<Point> points;  // sorted by x; several runs with the same x are averaged
    int color = 1;              // gnuplot line colour index
    int dash = 1;               // gnuplot dash type (lines)
    bool y2 = false;            // plotted against the second y axis (bars)
};
struct Chart {
    enum class Kind { lines, bars };
    std::string file;  // e.g. "queue_batch.png"
    Kind kind = Kind::lines;
    std::string title, xlabel, ylabel, y2label;
    bool logx = false, logy = false;
    std::vector<std::string> categories;  // bars: point x is the index of its category
    std::vector<Series> series;           // only non-empty series
    bool empty() const { return series.empty(); }
    std::string skip_reason;  // why it is empty
};

// The five charts, in order: queue_batch, queue_consumers, queue_latency, ingest, commit.
Chart queue_batch_chart(const std::vector<Run>&);
Chart queue_consumers_chart(const std::vector<Run>&);
Chart queue_latency_chart(const std::vector<Run>&);
Chart ingest_chart(const std::vector<Run>&);
Chart commit_chart(const std::vector<Run>&);
std::vector<Chart> build_charts(const std::vector<Run>&);

// The gnuplot script drawing `charts` (non-empty ones) from <out_dir>/<stem>.dat into <out_dir>/<file>;
// write_data_file writes the matching data file (one gnuplot index block per series).
std::string gnuplot_script(const std::vector<Chart>& charts, const std::string& out_dir);
void write_data_file(const Chart&, const std::string& path);

}  // namespace aqbench
