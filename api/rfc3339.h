// RFC 3339 timestamps, the one format sbx writes times in (object metadata, conditions, store
// rows, events) and the one parser of them, for the controller and sbxctl alike.
//
// Why here: api is the lowest target of the tree (sbx::controller, the cli and sbx::emulator all
// link sbx::api), and api/resources.h already defines its timestamps as RFC 3339 text, so the
// format lives beside the types that carry it (STYLE.md: "shared primitives (trim, time
// parsing) have one home"). Stateless functions; thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace sbx::api {

using WallTime = std::chrono::system_clock::time_point;

// UTC with second precision (the fraction is dropped), e.g. "2026-09-01T12:00:00Z". Text order
// of two results is time order (the store relies on it).
std::string FormatRfc3339(WallTime t);

// Millisecond precision, always three places: "2026-09-01T12:00:00.250Z" (text order is time
// order among these too). For intervals that are summed (Sandbox.status.usage.runningSince).
std::string FormatRfc3339Millis(WallTime t);

// Parses "YYYY-MM-DDTHH:MM:SS[.fraction](Z|z|+hh:mm|-hh:mm)": what FormatRfc3339 writes, plus
// fractional seconds (any number of digits, kept to the clock's resolution) and numeric offsets
// ("2026-09-01T12:00:00.5+02:00"). nullopt when malformed: a missing zone, a date that does not
// exist (2026-02-30), an hour above 23, a minute above 59, a second above 60 (a leap second
// counts as the next second's start), an empty fraction, anything after the zone.
std::optional<WallTime> ParseRfc3339(std::string_view text);

// Milliseconds since the Unix epoch (the store's *_ms columns, the audit log's time, the usage
// ledger's periods), and back.
int64_t UnixMillis(WallTime t);
WallTime FromUnixMillis(int64_t ms);

}  // namespace sbx::api
