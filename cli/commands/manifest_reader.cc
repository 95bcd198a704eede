#include "cli/commands/manifest_reader.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <system_error>

#include "api/defaults.h"
#include "api/manifest_check.h"
#include "api/validation.h"
#include "cli/commands/command_context.h"
#include "cli/commands/object_update.h"

namespace sbx::cli {
namespace {

namespace fs = std::filesystem;

bool IsManifestFile(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".yaml" || ext == ".yml" || ext == ".json";
}

// Expands one -f argument into the files to read, or an error line.
std::vector<std::string> ExpandPath(const std::string& path, bool recursive,
                                    std::vector<std::string>& errors) {
  if (path == "-") {
    return {path};
  }
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (ec || !fs::exists(st)) {
    errors.push_back("the path \"" + path + "\" does not exist");
    return {};
  }
  if (!fs::is_directory(st)) {
    return {path};
  }
  std::vector<std::string> files;
  const auto add = [&files](const fs::directory_entry& e) {
    std::error_code ec2;
    if (e.is_regular_file(ec2) && IsManifestFile(e.path())) {
      files.push_back(e.path().string());
    }
  };
  if (recursive) {
    for (auto it = fs::recursive_directory_iterator(path, ec);
         !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
      add(*it);
    }
  } else {
    for (auto it = fs::directory_iterator(path, ec); !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      add(*it);
    }
  }
  if (ec) {
    errors.push_back("cannot read directory \"" + path + "\": " + ec.message());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// `size` is unknown (nullopt) for a stream cut off at the limit.
std::string TooLarge(const std::string& file, std::optional<std::uintmax_t> size,
                     size_t max_bytes) {
  const std::string limit =
      "the limit of " + std::to_string(max_bytes) + " bytes (--max-manifest-bytes)";
  if (!size) {
    return file + ": manifest is more than " + limit;
  }
  return file + ": manifest is " + std::to_string(*size) + " bytes, more than " + limit;
}

// Stops as soon as more than max_bytes were read: a stream (stdin, a pipe) has no size to check
// first.
bool ReadBounded(std::istream& in, const std::string& file, size_t max_bytes, std::string& content,
                 std::vector<std::string>& errors) {
  content.clear();
  char buffer[64 * 1024];
  while (in) {
    in.read(buffer, sizeof(buffer));
    const auto got = static_cast<size_t>(in.gcount());
    if (content.size() + got > max_bytes) {
      errors.push_back(TooLarge(file, std::nullopt, max_bytes));
      return false;
    }
    content.append(buffer, got);
  }
  if (in.bad()) {
    errors.push_back("cannot read \"" + file + "\"");
    return false;
  }
  return true;
}

bool ReadFile(const std::string& path, size_t max_bytes, std::istream& stdin_stream,
              std::string& content, std::vector<std::string>& errors) {
  if (path == "-") {
    return ReadBounded(stdin_stream, path, max_bytes, content, errors);
  }
  // Refuse a large file by its size, before reading any of it.
  std::error_code ec;
  if (fs::is_regular_file(path, ec)) {
    const std::uintmax_t size = fs::file_size(path, ec);
    if (!ec && size > max_bytes) {
      errors.push_back(TooLarge(path, size, max_bytes));
      return false;
    }
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    errors.push_back("cannot read \"" + path + "\"");
    return false;
  }
  // Still bounded: the file may grow after the check, or be a FIFO (<(…)) with no size.
  return ReadBounded(in, path, max_bytes, content, errors);
}

}  // namespace

std::string Location(const api::Manifest& manifest) { return api::ManifestLocation(manifest); }

ManifestSet ReadManifests(const ManifestReadOptions& options, std::istream& stdin_stream) {
  ManifestSet set;
  std::vector<std::string> files;
  for (const std::string& path : options.paths) {
    for (std::string& f : ExpandPath(path, options.recursive, set.errors)) {
      files.push_back(std::move(f));
    }
  }
  for (const std::string& file : files) {
    std::string content;
    if (!ReadFile(file, options.max_manifest_bytes, stdin_stream, content, set.errors)) {
      continue;
    }
    api::DecodeManifestText(content, file, set.manifests, set.errors);
  }
  api::ManifestCheckOptions check;
  check.namespace_override = options.namespace_override;
  check.validate = options.validate;
  check.validation = options.validation;
  api::CheckManifests(set.manifests, check, set.errors);
  return set;
}

std::optional<ManifestSet> ReadCommandManifests(CommandContext& ctx,
                                                const std::vector<std::string>& paths,
                                                bool recursive, bool validate) {
  ManifestReadOptions read;
  read.paths = paths;
  read.recursive = recursive;
  read.validate = validate;
  read.max_manifest_bytes = ctx.options().max_manifest_bytes;
  read.validation = CommandValidationOptions();
  if (ctx.options().namespace_given) {
    read.namespace_override = ctx.options().namespace_;
  }
  ManifestSet set = ReadManifests(read, ctx.in());
  if (!set.errors.empty()) {
    for (const std::string& line : set.errors) {
      ctx.PrintError(line);
    }
    return std::nullopt;
  }
  return set;
}

}  // namespace sbx::cli
