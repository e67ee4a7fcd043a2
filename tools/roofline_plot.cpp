#include "roofline_plot.h"

#include <sys/wait.h>

#include <cstdlib>

#include <fmt/format.h>

#include "cli_support.h"

namespace mlajit::cli {
namespace {

// Achieved bandwidth (x) against achieved compute (y), one point per bench row, with the
// HBM and tensor-core ceilings; decode MLA sits near the bandwidth line.
constexpr const char* kScript = R"PY(# Written by `mlajit bench --plot`; run again with: python3 {script}
import csv
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

HBM_GBPS = {hbm}
PEAK_TFLOPS = {peak}
rows = list(csv.DictReader(open({csv})))
fig, ax = plt.subplots(figsize=(9, 6))
for row in rows:
    gbps, tflops = float(row["gbps"]), float(row["tflops"])
    ratio = row.get("vs_fa2") or ""
    color = "tab:green" if ratio and float(ratio) >= 1 else ("tab:red" if ratio else "tab:blue")
    ax.scatter([gbps], [tflops], color=color, s=28)
    label = "H{{}} B{{}} L{{}} p{{}} q{{}} {{}}".format(row["heads"], row["batch"], row["kv_len"],
                                            row["page"], row["q_len"], row["variant"]).strip()
    ax.annotate(label, (gbps, tflops), fontsize=6, xytext=(3, 3), textcoords="offset points")
ax.axvline(HBM_GBPS, color="gray", linestyle="--", label="HBM {{}} GB/s".format(HBM_GBPS))
ax.axhline(PEAK_TFLOPS, color="black", linestyle=":", label="BF16 dense {{}} TFLOP/s".format(PEAK_TFLOPS))
ax.set_xscale("log")
ax.set_yscale("log")
ax.set_xlabel("achieved GB/s")
ax.set_ylabel("achieved TFLOP/s")
ax.set_title("mlajit MLA decode (green: faster than FlashInfer FA2, red: slower)")
ax.legend(loc="lower right", fontsize=8)
ax.grid(True, which="both", alpha=0.3)
fig.tight_layout()
fig.savefig({png}, dpi=150)
)PY";

std::string python_string(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\\' || c == '\'') quoted += '\\';
    quoted += c;
  }
  return quoted + "'";
}

std::string script_path_for(const std::string& png_path) {
  const std::string suffix = ".png";
  if (png_path.size() > suffix.size() &&
      png_path.compare(png_path.size() - suffix.size(), suffix.size(), suffix) == 0) {
    return png_path.substr(0, png_path.size() - suffix.size()) + ".py";
  }
  return png_path + ".py";
}

int shell_status(const std::string& command) {
  const int status = std::system(command.c_str());
  return status != -1 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace

std::string shell_quote(const std::string& path) {
  std::string quoted = "'";
  for (char c : path) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string write_and_run_roofline_plot(const std::string& csv_path, const std::string& png_path) {
  const std::string script = script_path_for(png_path);
  write_text_file(script, fmt::format(kScript, fmt::arg("script", script),
                                      fmt::arg("hbm", kHbmGbps), fmt::arg("peak", kBf16Tflops),
                                      fmt::arg("csv", python_string(csv_path)),
                                      fmt::arg("png", python_string(png_path))));
  if (shell_status("python3 -c 'import matplotlib' >/dev/null 2>&1") != 0) {
    return fmt::format("python3 with matplotlib is not available; run {} where it is", script);
  }
  if (shell_status("python3 " + shell_quote(script)) != 0) {
    return fmt::format("{} failed (its error is above)", script);
  }
  return "";
}

}  // namespace mlajit::cli
