#include "tetra/base/error.hpp"

namespace tetra {

std::string SourceLocation::str() const {
  std::string out = file;
  if (line > 0) {
    out += ":" + std::to_string(line);
    if (column > 0) out += ":" + std::to_string(column);
  }
  return out;
}

namespace {
std::string compose(const SourceLocation& where, const std::string& key, const std::string& message) {
  std::string out;
  const std::string loc = where.str();
  if (!loc.empty()) out += loc + ": ";
  if (!key.empty()) out += key + ": ";
  out += message;
  // One line, always: fold any newline a lower layer put in.
  for (char& c : out) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return out;
}
}  // namespace

UserError::UserError(const std::string& message)
    : std::runtime_error(compose({}, {}, message)), detail_(message) {}

UserError::UserError(SourceLocation where, std::string key, const std::string& message)
    : std::runtime_error(compose(where, key, message)),
      where_(std::move(where)),
      key_(std::move(key)),
      detail_(message) {}

}  // namespace tetra
