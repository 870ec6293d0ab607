// The entries of one L1Cache shard and the index that finds them (internal to l1_cache.cc;
// a header of its own so that the index is unit-tested by itself: l1_nodes_test.cc).
//
// A lookup of a random key in a cache much larger than the CPU caches is a chain of cache misses,
// so the layout counts them: a node carries its key bytes right behind it (one allocation), and
// the index is an open-addressing table of {hash, node} slots with linear probing, so a lookup
// reads one slot (whose stored hash rejects other keys without touching their nodes) and one
// node. std::unordered_set took three: its bucket, the node before the match (libstdc++ buckets
// point at the predecessor), the node, plus the key's own heap buffer.
//
// Thread-safety: none; the shard's mutex guards all of it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <new>
#include <string_view>
#include <vector>

#include "common/logging.h"
#include "features/cache/l1_cache.h"

namespace dais::features::l1 {

enum class Queue : uint8_t { kWindow, kProbation, kProtected };

struct Link {
  Link* prev = this;
  Link* next = this;
};

// One entry; created and freed only by NodeIndex (its key bytes follow the object).
class Node : public Link {
 public:
  Node(const Node&) = delete;
  Node& operator=(const Node&) = delete;

  std::string_view key() const {
    return {reinterpret_cast<const char*>(this) + sizeof(Node), key_size_};
  }
  uint64_t hash() const { return hash_; }

  RecordPtr record;
  uint64_t deadline_ns = 0;
  size_t charge = 0;
  Queue queue = Queue::kWindow;
  bool candidate = false;  // moved out of the window, admission still undecided

 private:
  friend class NodeIndex;
  Node(uint64_t hash, size_t key_size) : hash_(hash), key_size_(key_size) {}
  static Node* Create(std::string_view key, uint64_t hash) {
    void* mem = ::operator new(sizeof(Node) + key.size());
    Node* n = new (mem) Node(hash, key.size());
    if (!key.empty()) std::memcpy(static_cast<char*>(mem) + sizeof(Node), key.data(), key.size());
    return n;
  }
  static void Destroy(Node* n) {
    n->~Node();
    ::operator delete(n);
  }

  const uint64_t hash_;
  const size_t key_size_;
};

// Intrusive doubly linked list with a sentinel; front = most recently used.
class List {
 public:
  List() = default;
  List(const List&) = delete;
  List& operator=(const List&) = delete;

  bool empty() const { return head_.next == &head_; }
  Node* back() { return empty() ? nullptr : static_cast<Node*>(head_.prev); }
  void PushFront(Node* n) {
    n->prev = &head_;
    n->next = head_.next;
    head_.next->prev = n;
    head_.next = n;
  }
  static void Unlink(Node* n) {
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
  }
  void MoveToFront(Node* n) {
    Unlink(n);
    PushFront(n);
  }
  void Reset() { head_.prev = head_.next = &head_; }

 private:
  Link head_;
};

// Owns the nodes; finds them by (key, hash). Open addressing, linear probing, at most half full
// (doubles when it would pass that; never shrinks), deletion by backward shift (no tombstones,
// so probe runs stay as short as the live entries make them). The slot is hash & mask: the
// shard was picked with the hash's top bits.
class NodeIndex {
 public:
  NodeIndex() = default;
  NodeIndex(const NodeIndex&) = delete;
  NodeIndex& operator=(const NodeIndex&) = delete;
  ~NodeIndex() { Clear(); }

  Node* Find(std::string_view key, uint64_t hash) const {
    if (size_ == 0) return nullptr;
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.node == nullptr) return nullptr;
      if (s.hash == hash && s.node->key() == key) return s.node;
    }
  }

  // Creates the node of `key`, which must not be present (Find first).
  Node* Insert(std::string_view key, uint64_t hash) {
    if (2 * (size_ + 1) > slots_.size()) Grow();
    Node* n = Node::Create(key, hash);
    Place(Slot{hash, n});
    ++size_;
    return n;
  }

  // Removes and frees `n`, which must be in the index.
  void Erase(Node* n) {
    size_t hole = n->hash() & mask_;
    while (size_ == 0 || slots_[hole].node != n) {
      if (size_ == 0 || slots_[hole].node == nullptr) {  // not held: a caller bug
        DAIS_BUG("L1 NodeIndex::Erase of a node it does not hold");
        return;
      }
      hole = (hole + 1) & mask_;
    }
    // Backward shift: move each later entry of the probe run whose home slot does not lie
    // between the hole and itself into the hole, until the run ends.
    for (size_t j = (hole + 1) & mask_; slots_[j].node != nullptr; j = (j + 1) & mask_) {
      const size_t home = slots_[j].hash & mask_;
      if (((j - home) & mask_) >= ((j - hole) & mask_)) {
        slots_[hole] = slots_[j];
        hole = j;
      }
    }
    slots_[hole] = Slot{};
    --size_;
    Node::Destroy(n);
  }

  // Frees every node.
  void Clear() {
    for (Slot& s : slots_) {
      if (s.node != nullptr) Node::Destroy(s.node);
      s = Slot{};
    }
    size_ = 0;
  }

  size_t size() const { return size_; }
  size_t slots() const { return slots_.size(); }

 private:
  struct Slot {
    uint64_t hash = 0;
    Node* node = nullptr;
  };

  void Place(const Slot& s) {
    size_t i = s.hash & mask_;
    while (slots_[i].node != nullptr) i = (i + 1) & mask_;
    slots_[i] = s;
  }

  void Grow() {
    std::vector<Slot> old(slots_.empty() ? 16 : 2 * slots_.size());
    old.swap(slots_);
    mask_ = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.node != nullptr) Place(s);
    }
  }

  std::vector<Slot> slots_;
  size_t mask_ = 0;
  size_t size_ = 0;
};

}  // namespace dais::features::l1
