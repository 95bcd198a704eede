#include "api/manifest_check.h"

#include <map>
#include <sstream>

#include "api/defaults.h"

namespace sbx::api {

void AppendErrorLines(const Status& status, std::vector<std::string>& errors) {
  std::istringstream lines(status.message());
  std::string line;
  bool any = false;
  while (std::getline(lines, line)) {
    if (!line.empty()) {
      errors.push_back(line);
      any = true;
    }
  }
  if (!any) {
    errors.push_back(status.ToString());
  }
}

std::string ManifestLocation(const Manifest& manifest) {
  return manifest.file + ":" + std::to_string(manifest.line);
}

void DecodeManifestText(std::string_view content, std::string_view file,
                        std::vector<Manifest>& manifests, std::vector<std::string>& errors) {
  auto decoded = DecodeManifests(content, file);
  if (!decoded.ok()) {
    AppendErrorLines(decoded.status(), errors);
    return;
  }
  for (Manifest& m : *decoded) {
    manifests.push_back(std::move(m));
  }
}

void CheckManifests(std::vector<Manifest>& manifests, const ManifestCheckOptions& options,
                    std::vector<std::string>& errors) {
  std::map<ObjectKey, const Manifest*> seen;
  for (Manifest& m : manifests) {
    if (options.namespace_override && m.object.metadata.namespace_ == kDefaultNamespace) {
      m.object.metadata.namespace_ = *options.namespace_override;
    }
    if (options.validate) {
      ApplyDefaults(m.object);
      const Status valid = Validate(m.object, options.validation);
      if (!valid.ok()) {
        // Validate may report several problems, one per line: place each one.
        std::istringstream lines(valid.message());
        std::string line;
        while (std::getline(lines, line)) {
          if (!line.empty()) {
            AppendErrorLines(LocateError(m, Status(valid.code(), line)), errors);
          }
        }
        continue;
      }
    }
    const ObjectKey key = KeyOf(m.object);
    auto [it, inserted] = seen.emplace(key, &m);
    if (!inserted) {
      std::string type(KindName(key.kind));
      for (char& c : type) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      }
      errors.push_back(ManifestLocation(m) + ": " + type + " \"" + key.namespace_ + "/" + key.name +
                       "\" is also defined at " + ManifestLocation(*it->second));
    }
  }
}

}  // namespace sbx::api
