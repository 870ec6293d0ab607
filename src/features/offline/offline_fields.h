// The fields of offline feature files (offline_files.h): text helpers, feature values and entity
// ids (text or JSON), dates and timestamps: the proleptic Gregorian calendar (Howard Hinnant's
// days_from_civil / civil_from_days), ISO-8601 UTC text and epoch numbers in seconds,
// milliseconds, microseconds or nanoseconds (told apart by magnitude).
#pragma once

#include <rapidjson/document.h>

#include <cstdint>
#include <string>
#include <string_view>

#include "dais/status.h"
#include "features/spec/feature_codec.h"
#include "features/spec/feature_spec.h"

namespace dais::features::internal {

bool IsSpace(char c);
std::string_view Trim(std::string_view s);
bool EqualsNoCase(std::string_view a, std::string_view b);
bool EndsWithNoCase(std::string_view s, std::string_view suffix);
// Text shown in a message: at most 40 bytes of it.
std::string Quote(std::string_view s);

// A feature's value from CSV text ("1.5", "[1, 2, 3]", "" for its default), appended in the
// record's binary layout.
Status AppendFeatureText(const FeatureDef& f, std::string_view text, std::string* out);
// The same from a JSON value (number, boolean, nested arrays, null for the default).
Status AppendFeatureJson(const FeatureDef& f, const rapidjson::Value& v, std::string* out);
// An entity id in its canonical text.
StatusOr<std::string> EntityFromText(KeyType type, std::string_view text);
StatusOr<std::string> EntityFromJson(KeyType type, const rapidjson::Value& v);

int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d);
void CivilFromDays(int64_t z, int64_t* y, int64_t* m, int64_t* d);
// "YYYY-MM-DD" as days since 1970-01-01; false when it is not a valid date.
bool ParseDate(std::string_view s, int64_t* days);
bool IsDate(std::string_view s);
// ISO-8601 UTC ("2026-11-30T12:00:00.5Z", "2026-11-30 12:00:00", "2026-11-30") in Unix
// microseconds; false when it is not one.
bool ParseIsoUs(std::string_view s, int64_t* us);
// A whole-text number: an int64 when it is one, else a double (from_chars takes "nan", "inf").
bool ParseNumber(std::string_view s, Scalar* out);
// An epoch number in Unix microseconds, its unit told by its magnitude.
StatusOr<int64_t> NumberToUs(const Scalar& v);

}  // namespace dais::features::internal
