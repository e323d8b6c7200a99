/* Canonical 128-bit hashes of HLO instructions, computations and modules: the compile cache's
 * keys. Two graphs get the same key exactly when they compute the same thing the same way, as
 * far as their IR can tell: names, metadata and pointers never enter a key; shapes, element
 * types, non-default layouts, every semantic attribute, constants' bytes, operand order and
 * called computations all do. Keys are stable across processes and machines (explicit
 * little-endian serialization, type and opcode names rather than enum values), so they can
 * name files in an on-disk cache. */
#ifndef CACHE_HASH_H
#define CACHE_HASH_H
#include <stdbool.h>
#include <stdint.h>

#include "hlo/ir.h"

/* Bump when the canonical form changes: it seeds every hash, so keys written by an older
 * latch can never match a graph hashed by a newer one. */
#define CACHE_HASH_FORMAT 1

typedef struct cache_key {
  uint64_t lo, hi;
} cache_key;

static inline bool cache_key_equal(cache_key a, cache_key b) {
  return a.lo == b.lo && a.hi == b.hi;
}

/* The node hash: opcode, shape, attributes, called computations (hashed here) and
 * operand_keys[0..operand_count) in order. operand_keys may be NULL when the instruction has
 * no operands. This is what capture/ computes incrementally as ops are recorded. */
cache_key cache_hash_instr(const hlo_instr *instr, const cache_key *operand_keys);

/* A computation's hash: its parameters in parameter-number order, its root, and any other
 * instruction nothing uses (a dead side effect still matters); callees hashed once each. */
cache_key cache_hash_comp(const hlo_comp *comp);

/* A module's hash: its entry computation (parameters and outputs in order) and the header
 * attributes that can change execution (input_output_alias and the like); not its name. */
cache_key cache_hash_module(const hlo_module *module);

/* 32 lowercase hex digits, hi then lo, and a NUL. */
void cache_key_hex(cache_key key, char out[33]);

#endif
