// specdec/flat_table.h — open-addressing hash table from 64-bit keys to small values.
//
// One flat array of slots, linear probing, backward-shift deletion (no tombstones, so lookups
// stay short after any number of erasures). Used where a table is updated per decoded token
// (the n-gram drafter's window tables, the prompt-lookup index): an update never allocates
// except when the table doubles, which happens O(log max_size) times over its life.
//
// The keys must already be well mixed (ngram_key, rolling hashes): the home slot is taken from
// the key's top bits after a Fibonacci multiply, which also spreads polynomial hashes.
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <vector>

#include "specdec/error.h"

namespace specdec {

template <typename Value>
class FlatKeyTable {
 public:
  // max_size > 0: the table never holds more keys than this (find_or_insert refuses a new key
  // beyond it) and never has more than bit_ceil(2 * max_size) slots, so memory is bounded by
  // max_size and the load factor stays <= 1/2. max_size == 0: unbounded, doubling as needed.
  explicit FlatKeyTable(size_t max_size = 0) : max_size_(max_size) {
    if (max_size_ > 0) max_slots_ = std::bit_ceil(2 * max_size_);
  }

  // The value of `key`, or nullptr. Cost: O(1) expected (probe length at load <= 1/2).
  const Value* find(uint64_t key) const {
    if (size_ == 0) return nullptr;
    for (size_t i = home_slot(key);; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (!s.used) return nullptr;
      if (s.key == key) return &s.value;
    }
  }
  Value* find(uint64_t key) { return const_cast<Value*>(static_cast<const FlatKeyTable*>(this)->find(key)); }

  // The value of `key`, inserted as Value{} (and *inserted set) when absent; nullptr when absent
  // and the table already holds max_size keys. Invalidates pointers into the table when it
  // inserts (the table may double).
  Value* find_or_insert(uint64_t key, bool* inserted) {
    *inserted = false;
    if (Value* v = find(key)) return v;
    if (max_size_ > 0 && size_ >= max_size_) return nullptr;
    if (2 * (size_ + 1) > slots_.size()) grow();
    size_t i = home_slot(key);
    while (slots_[i].used) i = (i + 1) & mask_;
    slots_[i].used = true;
    slots_[i].key = key;
    slots_[i].value = Value{};
    ++size_;
    *inserted = true;
    return &slots_[i].value;
  }

  // Removes `key` if present (returns whether it was). Moves later entries of the same probe
  // run back (pointers into the table are invalidated). Cost: O(1) expected.
  bool erase(uint64_t key) {
    if (size_ == 0) return false;
    size_t i = home_slot(key);
    while (true) {
      if (!slots_[i].used) return false;
      if (slots_[i].key == key) break;
      i = (i + 1) & mask_;
    }
    // Backward shift: move each later entry of the run into the hole unless its home lies
    // cyclically in (hole, entry], where it would become unreachable.
    size_t hole = i;
    for (size_t j = (i + 1) & mask_; slots_[j].used; j = (j + 1) & mask_) {
      const size_t home = home_slot(slots_[j].key);
      const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
      if (stays) continue;
      slots_[hole] = slots_[j];
      hole = j;
    }
    slots_[hole].used = false;
    --size_;
    return true;
  }

  // Empties the table, keeping its slots (no deallocation). Cost: O(slots).
  void clear() {
    if (size_ == 0) return;
    for (Slot& s : slots_) s.used = false;
    size_ = 0;
  }

  size_t size() const { return size_; }
  size_t slot_count() const { return slots_.size(); }
  size_t max_size() const { return max_size_; }
  // The slot where probing for `key` starts (exposed so tests can build colliding keys).
  size_t home_slot(uint64_t key) const {
    return slots_.empty() ? 0 : static_cast<size_t>((key * 0x9e3779b97f4a7c15ULL) >> shift_);
  }
  // Same as home_slot for a table of `n_slots` slots (a power of two).
  static size_t home_slot_in(uint64_t key, size_t n_slots) {
    return n_slots <= 1 ? 0 : static_cast<size_t>((key * 0x9e3779b97f4a7c15ULL) >> (64 - std::countr_zero(n_slots)));
  }

  // Calls f(key, value) for every entry, in slot order (not a meaningful order).
  template <typename F>
  void for_each(F&& f) const {
    for (const Slot& s : slots_) {
      if (s.used) f(s.key, s.value);
    }
  }

 private:
  struct Slot {
    uint64_t key = 0;
    bool used = false;
    Value value{};
  };

  void grow() {
    size_t n = slots_.empty() ? kInitialSlots : 2 * slots_.size();
    if (max_slots_ > 0 && slots_.empty()) n = std::min(n, max_slots_);
    SPECDEC_CHECK(max_slots_ == 0 || n <= max_slots_, "flat table grew past its bound");
    std::vector<Slot> old;  // (old slot count)
    old.swap(slots_);
    slots_.assign(n, Slot{});
    mask_ = n - 1;
    shift_ = 64 - std::countr_zero(n);
    for (const Slot& s : old) {
      if (!s.used) continue;
      size_t i = home_slot(s.key);
      while (slots_[i].used) i = (i + 1) & mask_;
      slots_[i] = s;
    }
  }

  static constexpr size_t kInitialSlots = 16;
  size_t max_size_ = 0;
  size_t max_slots_ = 0;     // 0: unbounded
  std::vector<Slot> slots_;  // (slot count) power of two, or empty before the first insert
  size_t mask_ = 0;
  int shift_ = 64;           // 64 - log2(slot count); unused while empty
  size_t size_ = 0;
};

}  // namespace specdec
