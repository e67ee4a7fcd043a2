#pragma once
// Comma-separated values (RFC 4180): the bench's --csv output and the CLI's embedded data.
#include <string>
#include <string_view>
#include <vector>

namespace mlajit::cli {

// A field as written: quoted when it holds a comma, a quote or a newline, quotes doubled
// (the ragged shape's label "ragged U[1,8192]" has a comma).
std::string csv_field(const std::string& text);

// The records of `text`, fields unquoted. Blank lines and lines starting with '#' (comments,
// e.g. where the data came from) are skipped; a quoted field may hold commas and doubled
// quotes, not newlines. Throws Error(kInvalidArgument) naming the line of an unterminated
// quote or of text after a closing quote.
std::vector<std::vector<std::string>> parse_csv(std::string_view text);

}  // namespace mlajit::cli
