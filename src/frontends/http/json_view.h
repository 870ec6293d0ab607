// One read-only API over a value of two JSON DOMs, so that the KServe v2 request codec is written
// once: simdjson's (the fast path: it parses an inference body 3.5-3.9x faster than rapidjson,
// docs/benchmarks.md) and rapidjson's (the path for the bodies simdjson refuses but JSON allows:
// integers beyond 64 bits and numbers beyond the largest double, and text that is not UTF-8,
// which rapidjson reads as it is; and the one whose error messages name the offset).
// Views are cheap to copy and valid while the document they view is.
#pragma once

#include <rapidjson/document.h>
#include <simdjson.h>

#include <cstdint>
#include <iterator>
#include <optional>
#include <string_view>

namespace dais::frontends::http {

// Adapts an iterator over DOM values to one over views of them.
template <typename View, typename It>
class ViewIterator {
 public:
  explicit ViewIterator(It it) : it_(it) {}
  View operator*() const { return View(*it_); }
  ViewIterator& operator++() {
    ++it_;
    return *this;
  }
  bool operator==(const ViewIterator& other) const { return it_ == other.it_; }

 private:
  It it_;
};

template <typename Iterator>
struct ViewRange {
  Iterator first, last;
  Iterator begin() const { return first; }
  Iterator end() const { return last; }
};

class RapidJsonView {
 public:
  using ArrayIterator = ViewIterator<RapidJsonView, rapidjson::Value::ConstValueIterator>;

  explicit RapidJsonView(const rapidjson::Value& value) : v_(&value) {}

  bool IsObject() const { return v_->IsObject(); }
  bool IsArray() const { return v_->IsArray(); }
  bool IsString() const { return v_->IsString(); }
  bool IsBool() const { return v_->IsBool(); }
  bool IsNumber() const { return v_->IsNumber(); }
  bool IsNull() const { return v_->IsNull(); }
  bool IsInt64() const { return v_->IsInt64(); }
  bool IsUint64() const { return v_->IsUint64(); }
  int64_t GetInt64() const { return v_->GetInt64(); }
  uint64_t GetUint64() const { return v_->GetUint64(); }
  double GetDouble() const { return v_->GetDouble(); }
  bool GetBool() const { return v_->GetBool(); }
  std::string_view GetString() const { return {v_->GetString(), v_->GetStringLength()}; }

  std::optional<RapidJsonView> Find(const char* name) const {
    auto it = v_->FindMember(name);
    if (it == v_->MemberEnd()) return std::nullopt;
    return RapidJsonView(it->value);
  }
  // Calls f(key, value) for each member, in order, while f returns true.
  template <typename F>
  void ForEachMember(F&& f) const {
    for (auto it = v_->MemberBegin(); it != v_->MemberEnd(); ++it) {
      if (!f(std::string_view(it->name.GetString(), it->name.GetStringLength()),
             RapidJsonView(it->value))) {
        return;
      }
    }
  }
  ViewRange<ArrayIterator> Elements() const {
    return {ArrayIterator(v_->Begin()), ArrayIterator(v_->End())};
  }
  int64_t Size() const { return v_->Size(); }  // of an array

 private:
  const rapidjson::Value* v_;
};

class SimdJsonView {
 public:
  using ArrayIterator = ViewIterator<SimdJsonView, simdjson::dom::array::iterator>;

  explicit SimdJsonView(simdjson::dom::element value) : v_(value) {}

  bool IsObject() const { return v_.type() == simdjson::dom::element_type::OBJECT; }
  bool IsArray() const { return v_.type() == simdjson::dom::element_type::ARRAY; }
  bool IsString() const { return v_.type() == simdjson::dom::element_type::STRING; }
  bool IsBool() const { return v_.type() == simdjson::dom::element_type::BOOL; }
  bool IsNumber() const { return v_.is_number(); }
  bool IsNull() const { return v_.is_null(); }
  bool IsInt64() const { return v_.is_int64(); }
  bool IsUint64() const { return v_.is_uint64(); }
  int64_t GetInt64() const { return As<int64_t>(); }
  uint64_t GetUint64() const { return As<uint64_t>(); }
  double GetDouble() const { return As<double>(); }
  bool GetBool() const { return As<bool>(); }
  std::string_view GetString() const { return As<std::string_view>(); }

  // The first member named `name`, as rapidjson's FindMember finds it.
  std::optional<SimdJsonView> Find(const char* name) const {
    simdjson::dom::element found;
    if (As<simdjson::dom::object>().at_key(name).get(found)) return std::nullopt;
    return SimdJsonView(found);
  }
  template <typename F>
  void ForEachMember(F&& f) const {
    for (auto [key, value] : As<simdjson::dom::object>()) {
      if (!f(key, SimdJsonView(value))) return;
    }
  }
  ViewRange<ArrayIterator> Elements() const {
    const auto array = As<simdjson::dom::array>();
    return {ArrayIterator(array.begin()), ArrayIterator(array.end())};
  }
  // Of an array. simdjson's count saturates at 2^24 - 1 elements: beyond, they are counted.
  int64_t Size() const {
    const auto array = As<simdjson::dom::array>();
    const size_t n = array.size();
    if (n < 0xFFFFFF) return static_cast<int64_t>(n);
    return std::distance(array.begin(), array.end());
  }

 private:
  // The value as T, or T{} when it is not one (callers check the type first).
  template <typename T>
  T As() const {
    T out{};
    if (v_.get(out)) return T{};
    return out;
  }

  simdjson::dom::element v_;
};

}  // namespace dais::frontends::http
