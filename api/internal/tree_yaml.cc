// yaml-cpp adapter for the codec tree: positions from node Marks, quoted vs plain scalars from
// the node tag ("!" = quoted, "?" = plain), and an emitter that quotes strings which would read
// back as another type.
#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <istream>
#include <streambuf>
#include <unordered_set>

#include "api/codec.h"
#include "api/internal/tree.h"

namespace sbx::api::internal {
namespace {

int Line(const YAML::Mark& m) { return m.line >= 0 ? m.line + 1 : 0; }
int Column(const YAML::Mark& m) { return m.column >= 0 ? m.column + 1 : 0; }

std::string Where(std::string_view file, int line, int column) {
  return std::string(file) + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
}

bool IsNullWord(std::string_view s) {
  return s == "~" || s == "null" || s == "Null" || s == "NULL";
}

// Well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len = 0;
    unsigned char lo = 0x80;  // bounds of the second byte
    unsigned char hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) {
        lo = 0xA0;  // overlong
      } else if (c == 0xED) {
        hi = 0x9F;  // surrogates
      }
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) {
        lo = 0x90;  // overlong
      } else if (c == 0xF4) {
        hi = 0x8F;  // above U+10FFFF
      }
    } else {
      return false;
    }
    if (s.size() - i < len) {
      return false;
    }
    const auto second = static_cast<unsigned char>(s[i + 1]);
    if (second < lo || second > hi) {
      return false;
    }
    for (size_t k = 2; k < len; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) {
        return false;
      }
    }
    i += len;
  }
  return true;
}

// Thrown by TreeBuilder on its first error to stop the parser at once (the error itself is in
// TreeBuilder::error()); never leaves this file.
struct StopParsing {};

// Builds the tree straight from parser events: about twice as fast as building yaml-cpp's
// own node graph first, and keys come with their positions. Seeing the events also lets it
// refuse what yaml-cpp would otherwise accept at any cost: aliases (each one a copy of the
// anchored node: a 1 MiB scalar aliased 2,000 times took 4 GB), nesting deeper than
// kMaxManifestDepth (yaml-cpp's own guard reports "bad file" without a useful position) and
// more than kMaxManifestNodes nodes.
class TreeBuilder : public YAML::EventHandler {
 public:
  explicit TreeBuilder(std::string_view file) : file_(file) {}

  // The finished document root, once OnDocumentEnd ran; the first error, if any.
  Node TakeRoot() { return std::move(root_); }
  const Status& error() const { return error_; }
  // Where the last event with a position started (byte offset, and as line/column).
  const YAML::Mark& last_mark() const { return last_mark_; }

  void OnDocumentStart(const YAML::Mark& mark) override {
    last_mark_ = mark;
    root_ = Node();
    stack_.clear();
  }
  void OnDocumentEnd() override {}

  void OnNull(const YAML::Mark& mark, YAML::anchor_t) override {
    Count(mark);
    Node n;
    SetMark(n, mark);
    Finish(std::move(n));
  }

  void OnAlias(const YAML::Mark& mark, YAML::anchor_t) override {
    Fail(mark, PathOrYaml(CurrentPath()) + ": aliases (*name) are not allowed in sbx manifests");
  }

  void OnScalar(const YAML::Mark& mark, const std::string& tag, YAML::anchor_t,
                const std::string& value) override {
    // The one place every key and every string value passes: bytes that are not UTF-8 would
    // otherwise reach the store's JSON and (depending on the encoder) abort or turn into U+FFFD.
    if (!IsValidUtf8(value)) {
      Fail(mark, PathOrYaml(CurrentPath()) + ": not valid UTF-8");
    }
    Count(mark);
    Node n;
    SetMark(n, mark);
    if (!(tag == "?" && IsNullWord(value))) {
      n.type = Node::Type::kScalar;
      n.scalar = (tag == "?") ? Node::Scalar::kPlain : Node::Scalar::kString;
      n.text = value;
    }
    Finish(std::move(n));
  }

  void OnSequenceStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {
    Open(Node::Seq(), mark);
  }
  void OnSequenceEnd() override { Close(); }

  void OnMapStart(const YAML::Mark& mark, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {
    Open(Node::Map(), mark);
  }
  void OnMapEnd() override { Close(); }

 private:
  struct Frame {
    Node node;
    bool has_key = false;  // maps: a key was read, its value is next
    std::string key;
    int key_line = 0;
    int key_column = 0;
    std::unordered_set<std::string> keys;  // maps with many entries: duplicate check
  };

  void SetMark(Node& n, const YAML::Mark& mark) {
    n.line = Line(mark);
    n.column = Column(mark);
  }

  void Count(const YAML::Mark& mark) {
    last_mark_ = mark;
    if (++nodes_ > kMaxManifestNodes) {
      Fail(mark,
           "yaml: more than " + std::to_string(kMaxManifestNodes) + " keys and values in one file");
    }
  }

  void Open(Node n, const YAML::Mark& mark) {
    Count(mark);
    // Bounded here, before yaml-cpp (and the recursive decoder and emitters after it) go deeper.
    if (stack_.size() >= static_cast<size_t>(kMaxManifestDepth)) {
      Fail(mark, "yaml: nesting deeper than " + std::to_string(kMaxManifestDepth) + " levels");
    }
    SetMark(n, mark);
    Frame f;
    f.node = std::move(n);
    stack_.push_back(std::move(f));
  }

  void Close() {
    if (stack_.empty()) {
      return;
    }
    Frame f = std::move(stack_.back());
    stack_.pop_back();
    Finish(std::move(f.node));
  }

  // A complete node: becomes the root, a list item, a map key or a map value.
  void Finish(Node n) {
    if (stack_.empty()) {
      root_ = std::move(n);
      return;
    }
    Frame& top = stack_.back();
    if (top.node.type == Node::Type::kSeq) {
      top.node.items.push_back(std::move(n));
      return;
    }
    if (!top.has_key) {
      // Checked once the key is complete, not when it opens, so that an unclosed "[[[[…" (which
      // yaml-cpp reads as lists used as keys) is reported as too deep, where it is.
      if (n.type != Node::Type::kScalar) {
        Fail(n.line, n.column, "keys must be plain strings");
      }
      top.has_key = true;
      top.key = std::move(n.text);
      top.key_line = n.line;
      top.key_column = n.column;
      return;
    }
    top.has_key = false;
    if (IsDuplicate(top)) {
      Fail(top.key_line, top.key_column, Path(top.key) + ": duplicate field");
    }
    top.node.entries.push_back(
        Entry{std::move(top.key), top.key_line, top.key_column, std::move(n)});
  }

  bool IsDuplicate(Frame& f) {
    constexpr size_t kLinearLimit = 16;
    std::vector<Entry>& entries = f.node.entries;
    if (entries.size() < kLinearLimit) {
      for (const Entry& e : entries) {
        if (e.key == f.key) {
          return true;
        }
      }
      return false;
    }
    if (f.keys.empty()) {
      for (const Entry& e : entries) {
        f.keys.insert(e.key);
      }
    }
    return !f.keys.insert(f.key).second;
  }

  // Field path of the innermost open collection ("spec.setup[0]"; "" at the top).
  std::string ContainerPath() const {
    std::string path;
    for (size_t i = 0; i + 1 < stack_.size(); ++i) {
      const Frame& f = stack_[i];
      if (f.node.type == Node::Type::kMap) {
        path += path.empty() ? f.key : "." + f.key;
      } else {
        path += "[" + std::to_string(f.node.items.size()) + "]";
      }
    }
    return path;
  }

  // Field path of `key` in the innermost open mapping ("spec.setup[0].name").
  std::string Path(const std::string& key) const {
    std::string path = ContainerPath();
    return path.empty() ? key : path + "." + key;
  }

  // Field path of the node the next event completes: a map value, a list item, or (for a key,
  // whose own text may be what is wrong) the mapping it is a key of.
  std::string CurrentPath() const {
    if (stack_.empty()) {
      return "";
    }
    const Frame& top = stack_.back();
    if (top.node.type == Node::Type::kSeq) {
      return ContainerPath() + "[" + std::to_string(top.node.items.size()) + "]";
    }
    if (top.has_key) {
      return Path(top.key);
    }
    return ContainerPath();
  }

  static std::string PathOrYaml(const std::string& path) { return path.empty() ? "yaml" : path; }

  // Records the first error and stops the parser.
  [[noreturn]] void Fail(const YAML::Mark& mark, std::string_view problem) {
    Fail(Line(mark), Column(mark), problem);
  }
  [[noreturn]] void Fail(int line, int column, std::string_view problem) {
    error_ = InvalidArgumentError(Where(file_, line, column) + std::string(problem));
    throw StopParsing{};
  }

  std::string_view file_;
  Node root_;
  std::vector<Frame> stack_;
  size_t nodes_ = 0;  // in the whole stream: every document is kept
  YAML::Mark last_mark_;
  Status error_;
};

// Hands the caller's text (no copy) to yaml-cpp in chunks, and ends it early once yaml-cpp has
// read more than kMaxPendingFlowIndicators '[', '{' and ',' beyond the last event it delivered.
// yaml-cpp's scanner holds back every token of a flow collection that might still turn out to
// be a mapping key (any top-level "[…]" or "{…}", "[…]: v") until the collection ends, at up to
// 250 bytes per input byte: 8 MiB of "[[[[…" took 2 GB before the first event, where the depth
// limit could have stopped it. Counting flow indicators, not bytes, leaves long scalars alone.
class PacedBuffer : public std::streambuf {
 public:
  static constexpr size_t kMaxPendingFlowIndicators = 1 << 18;

  PacedBuffer(std::string_view text, const TreeBuilder& builder) : text_(text), builder_(builder) {
    char* p = const_cast<char*>(text.data());  // never written: get area only
    setg(p, p, p);
  }

  // True once the text was cut short; everything the parser said after that is moot.
  bool cut() const { return cut_; }
  // The builder's last_mark() when the text was cut: the collection, or the key before it.
  const YAML::Mark& cut_mark() const { return cut_mark_; }

 protected:
  int_type underflow() override {
    if (gptr() < egptr()) {
      return traits_type::to_int_type(*gptr());
    }
    const auto given = static_cast<size_t>(egptr() - eback());
    if (cut_ || given == text_.size()) {
      return traits_type::eof();
    }
    const size_t delivered =
        std::min(static_cast<size_t>(std::max(builder_.last_mark().pos, 0)), given);
    for (; counted_ < delivered; ++counted_) {
      delivered_indicators_ += IsFlowIndicator(text_[counted_]) ? 1 : 0;
    }
    if (given_indicators_ - delivered_indicators_ > kMaxPendingFlowIndicators) {
      cut_ = true;
      cut_mark_ = builder_.last_mark();
      return traits_type::eof();
    }
    const size_t n = std::min(kChunk, text_.size() - given);
    for (size_t i = given; i < given + n; ++i) {
      given_indicators_ += IsFlowIndicator(text_[i]) ? 1 : 0;
    }
    // eback() stays at the start of the text: yaml-cpp puts back the first bytes it reads.
    setg(eback(), egptr(), egptr() + n);
    return traits_type::to_int_type(*gptr());
  }

 private:
  static constexpr size_t kChunk = 4096;

  static bool IsFlowIndicator(char c) { return c == '[' || c == '{' || c == ','; }

  std::string_view text_;
  const TreeBuilder& builder_;
  bool cut_ = false;
  YAML::Mark cut_mark_;
  size_t given_indicators_ = 0;      // in text_[0, egptr())
  size_t counted_ = 0;               // text_[0, counted_) is counted in delivered_indicators_
  size_t delivered_indicators_ = 0;  // before the last event
};

// True if a YAML 1.1 or 1.2 reader could resolve the plain scalar to a number.
bool LooksNumeric(std::string_view s) {
  if (s.empty()) {
    return false;
  }
  std::string_view body = s;
  if (body.front() == '+' || body.front() == '-') {
    body.remove_prefix(1);
  }
  if (body.empty()) {
    return false;
  }
  if (body.size() > 1 && body[0] == '0' && (body[1] == 'x' || body[1] == 'o' || body[1] == 'b')) {
    return true;
  }
  const bool starts_digit = body.front() >= '0' && body.front() <= '9';
  if (starts_digit &&
      (body.find(':') != std::string_view::npos || body.find('_') != std::string_view::npos)) {
    return true;  // YAML 1.1 sexagesimal (1:30) and 1_000.
  }
  double ignored = 0;
  const char* end = body.data() + body.size();
  auto [ptr, ec] = std::from_chars(body.data(), end, ignored);
  return ptr == end && ec == std::errc();
}

bool NeedsQuotes(std::string_view s) {
  static constexpr std::string_view kWords[] = {
      "true", "True", "TRUE", "false", "False", "FALSE", "yes",  "Yes",  "YES", "no",
      "No",   "NO",   "on",   "On",    "ON",    "off",   "Off",  "OFF",  "y",   "Y",
      "n",    "N",    "~",    "null",  "Null",  "NULL",  ".inf", ".nan", "<<"};
  if (s.empty() || LooksNumeric(s)) {
    return true;
  }
  return std::find(std::begin(kWords), std::end(kWords), s) != std::end(kWords);
}

// A literal block ("|") reads back exactly only for text ending in one newline, with no
// leading space on the first line, no trailing spaces and only printable characters.
bool FitsLiteralBlock(std::string_view s) {
  if (s.size() < 2 || s.back() != '\n' || s[s.size() - 2] == '\n' || s.front() == ' ' ||
      s.front() == '\n') {
    return false;
  }
  char prev = '\0';
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    const auto u = static_cast<unsigned char>(c);
    if (c == '\n' && (prev == ' ' || prev == '\t')) {
      return false;
    }
    // Control characters, DEL and the C1 controls (UTF-8 C2 80–C2 9F, one of them the one-byte
    // CSI) are written escaped, in a double-quoted scalar, never raw to a terminal.
    if ((c != '\n' && c != '\t' && u < 0x20) || u == 0x7f ||
        (u == 0xc2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
         static_cast<unsigned char>(s[i + 1]) <= 0x9f)) {
      return false;
    }
    prev = c;
  }
  return true;
}

void EmitScalarString(YAML::Emitter& out, const std::string& s) {
  if (s.find('\n') != std::string::npos) {
    if (FitsLiteralBlock(s)) {
      // yaml-cpp ends the block with a newline and "|" keeps exactly one: drop ours.
      out << YAML::Literal << s.substr(0, s.size() - 1);
    } else {
      out << YAML::DoubleQuoted << s;
    }
    return;
  }
  if (NeedsQuotes(s)) {
    out << YAML::DoubleQuoted << s;
  } else {
    out << s;
  }
}

void Emit(YAML::Emitter& out, const Node& n) {
  switch (n.type) {
    case Node::Type::kNull:
      out << YAML::Null;
      return;
    case Node::Type::kMap: {
      if (n.entries.empty()) {
        out << YAML::Flow << YAML::BeginMap << YAML::EndMap;
        return;
      }
      std::vector<const Entry*> sorted;
      sorted.reserve(n.entries.size());
      for (const Entry& e : n.entries) {
        sorted.push_back(&e);
      }
      std::sort(sorted.begin(), sorted.end(),
                [](const Entry* a, const Entry* b) { return a->key < b->key; });
      out << YAML::BeginMap;
      for (const Entry* e : sorted) {
        out << YAML::Key;
        EmitScalarString(out, e->key);
        out << YAML::Value;
        Emit(out, e->value);
      }
      out << YAML::EndMap;
      return;
    }
    case Node::Type::kSeq:
      if (n.items.empty()) {
        out << YAML::Flow << YAML::BeginSeq << YAML::EndSeq;
        return;
      }
      out << YAML::BeginSeq;
      for (const Node& item : n.items) {
        Emit(out, item);
      }
      out << YAML::EndSeq;
      return;
    case Node::Type::kScalar:
      switch (n.scalar) {
        case Node::Scalar::kInt:
          out << n.int_value;
          return;
        case Node::Scalar::kFloat: {
          // Shortest text that reads back as the same double (no 0.10000000000000001).
          char buf[64];
          auto res = std::to_chars(buf, buf + sizeof(buf), n.float_value);
          out << std::string(buf, res.ptr);
          return;
        }
        case Node::Scalar::kBool:
          out << (n.bool_value ? "true" : "false");
          return;
        case Node::Scalar::kString:
        case Node::Scalar::kPlain:
          EmitScalarString(out, n.text);
          return;
      }
  }
}

}  // namespace

StatusOr<std::vector<Document>> ParseYaml(std::string_view content, std::string_view file) {
  std::vector<Document> out;
  TreeBuilder builder(file);
  PacedBuffer buffer(content, builder);
  std::istream in(&buffer);
  // Once the text was cut short, the parser's own verdict (an error, or documents) is moot.
  const auto cut_short = [&] {
    return InvalidArgumentError(Where(file, Line(buffer.cut_mark()), Column(buffer.cut_mark())) +
                                "yaml: a flow collection ([…] or {…}) with more than " +
                                std::to_string(PacedBuffer::kMaxPendingFlowIndicators) +
                                " entries; write it in block style");
  };
  try {
    YAML::Parser parser(in);
    // yaml-cpp can report documents forever on some malformed input (found by the codec
    // fuzzer: tests/fuzz/regressions/manifest_codec/). A document takes at least a few bytes
    // ("---\n"), so more documents than that cannot come from this input: stop with an error
    // instead of growing without bound.
    const size_t max_documents = content.size() / 3 + 2;
    while (parser.HandleNextDocument(builder)) {
      if (buffer.cut()) {
        return cut_short();
      }
      if (out.size() >= max_documents) {
        return InvalidArgumentError(Where(file, 1, 1) +
                                    "invalid YAML: the parser stopped making progress");
      }
      Node root = builder.TakeRoot();
      const int line = root.line;
      out.push_back(Document{std::move(root), line});
    }
  } catch (const StopParsing&) {
    return buffer.cut() ? cut_short() : builder.error();
  } catch (const YAML::DeepRecursion& e) {
    // Not reached while kMaxManifestDepth is below yaml-cpp's own limit; its message would be
    // "bad file".
    return InvalidArgumentError(Where(file, Line(e.mark), Column(e.mark)) +
                                "yaml: nesting deeper than " + std::to_string(kMaxManifestDepth) +
                                " levels");
  } catch (const YAML::Exception& e) {
    if (buffer.cut()) {
      return cut_short();
    }
    return InvalidArgumentError(Where(file, Line(e.mark), Column(e.mark)) +
                                "invalid YAML: " + e.msg);
  }
  if (buffer.cut()) {
    return cut_short();
  }
  return out;
}

std::string EmitYaml(const Node& node) {
  YAML::Emitter out;
  out.SetIndent(2);
  Emit(out, node);
  std::string text = out.c_str();
  if (!text.empty() && text.back() != '\n') {
    text += '\n';
  }
  return text;
}

}  // namespace sbx::api::internal
