#pragma once
/// User-facing errors. Library code throws these; only cli/main.cpp catches them, prints
/// what() as one line and exits 1 (docs/cli.md, "Conventions").

#include <stdexcept>
#include <string>

namespace tetra {

/// Where a value came from: a file with 1-based line and column (0 when unknown).
struct SourceLocation {
  std::string file;
  int line = 0;
  int column = 0;

  /// "file:line:col", "file:line", "file" or "" depending on what is known.
  [[nodiscard]] std::string str() const;
};

/// An error the user can fix: a bad file, a bad value, an infeasible layout asked for.
/// what() is one line: "file:line:col: key: message" (parts that are unknown are omitted).
class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message);
  UserError(SourceLocation where, std::string key, const std::string& message);

  [[nodiscard]] const SourceLocation& where() const noexcept { return where_; }
  [[nodiscard]] const std::string& key() const noexcept { return key_; }
  /// The message without location and key.
  [[nodiscard]] const std::string& detail() const noexcept { return detail_; }

 private:
  SourceLocation where_;
  std::string key_;
  std::string detail_;
};

}  // namespace tetra
