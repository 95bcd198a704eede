// Redaction of credentials from text that leaves a cloud client (Status messages, which end up
// in logs, conditions and events): every occurrence of a secret of 4 bytes or more becomes "***".
// Pure functions; thread-safe.
#pragma once

#include <string>
#include <string_view>

#include "api/status.h"

namespace sbx::controller::http {

// `text` with every occurrence of `secret` replaced by "***" (unchanged for a secret shorter
// than 4 bytes, which would scrub ordinary words).
std::string Redact(std::string text, std::string_view secret);

// `status` with an Authorization header value ("Bearer abc…") and its bare credential (the part
// after the scheme) scrubbed from the message; code, retry_after and reason are kept.
api::Status RedactAuthorization(const api::Status& status, std::string_view authorization);

}  // namespace sbx::controller::http
