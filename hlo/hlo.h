/* hlo/: the HLO IR and everything that works on it alone: element types, shapes with
 * symbolic dims, instructions, computations and modules in one arena; the builder with shape
 * inference; the verifier; HLO text printer and parser; simple passes. The layer's one
 * header: every other folder includes this and nothing else of hlo/. It uses only libc.
 * Declarations are grouped under the file that defines them. Private to the parser:
 * lex_internal.h, parse_internal.h. */
#ifndef HLO_H
#define HLO_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* ---- dtype.c ---- */
/* HLO element types: names as XLA prints them, sizes, and which ones latch computes with. */

typedef enum hlo_dtype {
  HLO_INVALID = 0,
  HLO_PRED,
  HLO_S2, HLO_S4, HLO_S8, HLO_S16, HLO_S32, HLO_S64,
  HLO_U2, HLO_U4, HLO_U8, HLO_U16, HLO_U32, HLO_U64,
  HLO_F16, HLO_BF16, HLO_F32, HLO_F64,
  HLO_C64, HLO_C128,
  HLO_F8E5M2, HLO_F8E4M3, HLO_F8E4M3FN, HLO_F8E4M3B11FNUZ, HLO_F8E5M2FNUZ,
  HLO_F8E4M3FNUZ, HLO_F8E3M4, HLO_F8E8M0FNU, HLO_F4E2M1FN,
  HLO_TOKEN, HLO_TUPLE, HLO_OPAQUE,
  HLO_DTYPE_COUNT
} hlo_dtype;

const char *hlo_dtype_name(hlo_dtype dtype);
/* HLO_INVALID when the name is not an element type (tuple is not named this way). */
hlo_dtype hlo_dtype_from_name(const char *name, size_t len);

/* True for the types latch evaluates: pred, s8..s64, u8..u64, f16, bf16, f32, f64. */
bool hlo_dtype_is_computable(hlo_dtype dtype);
/* Bytes of one element of a computable type; 0 for others. */
size_t hlo_dtype_size(hlo_dtype dtype);
bool hlo_dtype_is_float(hlo_dtype dtype);    /* f16 bf16 f32 f64 and the f8/f4 families */
bool hlo_dtype_is_signed(hlo_dtype dtype);   /* s2..s64 */
bool hlo_dtype_is_unsigned(hlo_dtype dtype); /* u2..u64 */
bool hlo_dtype_is_integral(hlo_dtype dtype); /* signed or unsigned, not pred */
bool hlo_dtype_is_complex(hlo_dtype dtype);
bool hlo_dtype_is_array(hlo_dtype dtype);    /* not token, tuple or opaque */
int hlo_dtype_bits(hlo_dtype dtype);

/* Conversions between half types and float, round-to-nearest-even, NaN kept quiet. */
float hlo_f16_to_f32(uint16_t bits);
uint16_t hlo_f32_to_f16(float value);
uint16_t hlo_f64_to_f16(double value);
float hlo_bf16_to_f32(uint16_t bits);
uint16_t hlo_f32_to_bf16(float value);
uint16_t hlo_f64_to_bf16(double value);

/* ---- alloc.c ---- */
/* The one allocation path (every layer's malloc goes through it): NULL on failure, which the
 * caller turns into HLO_ERR_INTERNAL "out of memory ..." or a sticky failed flag. */

void *hlo_malloc(size_t size);
void *hlo_calloc(size_t count, size_t size);
void *hlo_realloc(void *items, size_t size);
void *hlo_aligned_alloc(size_t alignment, size_t size); /* size a multiple of alignment */
char *hlo_strdup(const char *text);

/* Test-only (as SQLite's test_malloc.c): from the next allocation on, counting from 1, the
 * nth fails, and with every_after so does every one after it; nth 0 turns the hook off.
 * The counts cover the allocations since the hook was last set. */
void hlo_alloc_test_fail(long nth, bool every_after);
long hlo_alloc_test_count(void);    /* allocations counted (only while armed) */
long hlo_alloc_test_failures(void); /* allocations the hook failed */

/* ---- strbuf.c ---- */
/* A growable string, for printers and messages. Out of memory is sticky, as SQLite's
 * sqlite3OomFault: the first failed growth sets failed, later appends do nothing, and
 * hlo_sb_take returns NULL; a caller checks once, at the end. */

typedef struct hlo_strbuf {
  char *data; /* always NUL-terminated once anything was appended */
  size_t len;
  size_t cap;
  bool failed; /* a growth failed: the text is cut short */
} hlo_strbuf;

void hlo_sb_init(hlo_strbuf *sb);
void hlo_sb_free(hlo_strbuf *sb);
void hlo_sb_append(hlo_strbuf *sb, const char *text, size_t len);
void hlo_sb_puts(hlo_strbuf *sb, const char *text);
void hlo_sb_printf(hlo_strbuf *sb, const char *format, ...) __attribute__((format(printf, 2, 3)));
/* Returns the string (owned by the caller) and resets sb; NULL (sb freed) if sb failed. */
char *hlo_sb_take(hlo_strbuf *sb);

/* ---- arena.c ---- */
/* A bump allocator: a module and everything in it live in one arena and die together.
 * Out of memory is sticky: a failed allocation returns NULL and sets failed, and whoever
 * returns a status for the arena's module (parser, builder, clone, passes) reports it as
 * HLO_ERR_INTERNAL "out of memory". The copying helpers pass NULL on. */

typedef struct hlo_arena_block hlo_arena_block;
typedef struct hlo_arena {
  hlo_arena_block *head;
  size_t used_bytes;
  bool failed; /* an allocation failed: what was being built is incomplete */
} hlo_arena;

void hlo_arena_init(hlo_arena *arena);
void hlo_arena_free(hlo_arena *arena);
/* Zeroed, 16-byte aligned memory; NULL (and arena->failed set) when memory runs out. */
void *hlo_arena_alloc(hlo_arena *arena, size_t size);
/* The same, not zeroed: for a caller that writes every byte before reading any. */
void *hlo_arena_alloc_unzeroed(hlo_arena *arena, size_t size);
char *hlo_arena_strndup(hlo_arena *arena, const char *text, size_t len);
char *hlo_arena_strdup(hlo_arena *arena, const char *text);
void *hlo_arena_memdup(hlo_arena *arena, const void *data, size_t size);

/* ---- diag.c ---- */
/* Errors as values: a code and a message, filled by whoever failed first. */

typedef enum hlo_status {
  HLO_OK = 0,
  HLO_ERR_INPUT = 1,       /* malformed text, bad shapes, bad arguments: the caller's fault */
  HLO_ERR_UNSUPPORTED = 2, /* valid HLO that latch does not handle (an op, a type) */
  HLO_ERR_INTERNAL = 3,    /* an I/O failure or a broken invariant */
} hlo_status;

typedef struct hlo_diag {
  hlo_status status;
  char message[1024];
} hlo_diag;

/* Records the first error only: later ones are usually consequences. Returns code. */
hlo_status hlo_diag_set(hlo_diag *diag, hlo_status code, const char *format, ...)
    __attribute__((format(printf, 3, 4)));
void hlo_diag_clear(hlo_diag *diag);

/* ---- shape.c ---- */
/* Shapes: an element type with dims and a layout, or a tuple of shapes. */

#define HLO_MAX_RANK 12
/* Element counts past this are refused (by the parser, and by capture when a tensor is
 * made): products of the dims, and byte sizes eight or sixteen times larger, stay far from
 * int64 overflow for everyone using the shape. */
#define HLO_MAX_ELEMENTS ((int64_t)1 << 58)

typedef enum hlo_dim_kind {
  HLO_DIM_STATIC = 0,
  HLO_DIM_BOUNDED,   /* f32[<=4]: dims[i] holds the bound */
  HLO_DIM_UNBOUNDED, /* f32[?]: dims[i] is -1 */
} hlo_dim_kind;

typedef struct hlo_shape { /* (ordered to leave no hole: 152 bytes, not 160) */
  hlo_dtype dtype; /* HLO_TUPLE for tuples, HLO_TOKEN for token[] */
  int rank;
  int64_t dims[HLO_MAX_RANK];
  const char *layout_extra; /* text after ':' inside the layout braces, verbatim, or NULL */
  struct hlo_shape *tuple; /* tuple_count element shapes */
  int tuple_count;
  uint8_t dim_kind[HLO_MAX_RANK];
  /* Layout, minor-to-major. Always filled (the default {rank-1,...,0} when the text had
   * none); has_layout says whether it was written, so printing can keep the text's choice. */
  int8_t minor_to_major[HLO_MAX_RANK];
  bool has_layout;
} hlo_shape;

/* An array shape with the default layout; _set_array writes one in place (a value's, a
 * view's: no copy of a returned struct on the hot path). */
hlo_shape hlo_shape_make(hlo_dtype dtype, int rank, const int64_t *dims);
void hlo_shape_set_array(hlo_shape *shape, hlo_dtype dtype, int rank, const int64_t *dims);
hlo_shape hlo_shape_scalar(hlo_dtype dtype);
hlo_shape hlo_shape_tuple(hlo_arena *arena, int count, const hlo_shape *elements);
void hlo_shape_default_layout(hlo_shape *shape);
bool hlo_shape_is_tuple(const hlo_shape *shape);
bool hlo_shape_is_array(const hlo_shape *shape);
bool hlo_shape_is_default_layout(const hlo_shape *shape);
bool hlo_shape_is_dynamic(const hlo_shape *shape);
/* Number of elements (bounds for bounded dims); 1 for scalars, 0 for tuples. */
int64_t hlo_shape_elements(const hlo_shape *shape);
/* Bytes of a dense row-major array of this shape; 0 for tuples and uncomputable types. */
int64_t hlo_shape_bytes(const hlo_shape *shape);
/* Whether every array in shape (each tuple element) has at most HLO_MAX_BYTES bytes, its
 * element count and bytes computed without overflow: the verifier refuses larger shapes,
 * so everything past it may add and multiply a verified shape's sizes, offsets and
 * strides (and sum a few of them) in int64 without checks. */
bool hlo_shape_size_ok(const hlo_shape *shape);
#define HLO_MAX_BYTES ((int64_t)1 << 56)

/* Checked int64 arithmetic for sizes, offsets and strides read from text or a file: each
 * operation sets *overflow (sticky) instead of wrapping, so a formula reads as written and
 * is tested once at its end, as guards/expr.c's terms are. The one helper for it. */
static inline int64_t hlo_ck_add(bool *overflow, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) *overflow = true;
  return r;
}
static inline int64_t hlo_ck_sub(bool *overflow, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) *overflow = true;
  return r;
}
static inline int64_t hlo_ck_mul(bool *overflow, int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) *overflow = true;
  return r;
}
/* Same type and dims (recursively for tuples); layouts are ignored. */
bool hlo_shape_equal(const hlo_shape *a, const hlo_shape *b);
/* Deep copy of the tuple elements into arena. */
hlo_shape hlo_shape_clone(hlo_arena *arena, const hlo_shape *shape);
/* Row-major strides in elements. */
void hlo_shape_strides(const hlo_shape *shape, int64_t *strides);

/* Appends the shape as HLO text: f32[2,3]{1,0}; with_layout false omits layouts. */
void hlo_shape_print(hlo_strbuf *sb, const hlo_shape *shape, bool with_layout);
/* Formats into a caller buffer, for messages. */
const char *hlo_shape_str(const hlo_shape *shape, char *buffer, int size);
/* The same returned by value, so one message can hold several shapes, thread-safely:
 * hlo_shape_text(&a).s. */
typedef struct hlo_shape_text_buf {
  char s[192];
} hlo_shape_text_buf;
hlo_shape_text_buf hlo_shape_text(const hlo_shape *shape);

/* ---- ir.c ---- */
/* The HLO IR: instructions in computations in a module, all owned by the module's arena. */

typedef enum hlo_opcode {
#define OP(id, text) HLO_OP_##id,
#include "hlo/opcode.def"
#undef OP
  HLO_OP_COUNT
} hlo_opcode;

const char *hlo_opcode_name(hlo_opcode opcode);
/* HLO_OP_COUNT when the name is not an opcode. */
hlo_opcode hlo_opcode_from_name(const char *name, size_t len);
bool hlo_opcode_is_elementwise_unary(hlo_opcode opcode);
bool hlo_opcode_is_elementwise_binary(hlo_opcode opcode);

typedef struct hlo_ints {
  int count;
  int64_t *values;
} hlo_ints;

typedef enum hlo_direction {
  HLO_DIR_NONE = 0, HLO_DIR_EQ, HLO_DIR_NE, HLO_DIR_LT, HLO_DIR_LE, HLO_DIR_GT, HLO_DIR_GE
} hlo_direction;

typedef enum hlo_compare_type {
  HLO_CMP_DEFAULT = 0, HLO_CMP_FLOAT, HLO_CMP_TOTALORDER, HLO_CMP_SIGNED, HLO_CMP_UNSIGNED
} hlo_compare_type;

typedef enum hlo_rng_algorithm {
  HLO_RNG_DEFAULT = 0, HLO_RNG_THREE_FRY, HLO_RNG_PHILOX
} hlo_rng_algorithm;

typedef enum hlo_rng_distribution {
  HLO_RNG_UNIFORM = 0, HLO_RNG_NORMAL
} hlo_rng_distribution;

/* window={size=.. stride=.. pad=.. lhs_dilate=.. rhs_dilate=.. rhs_reversal=..}.
 * Unset fields keep their defaults: stride 1, pad 0, dilations 1, no reversal. */
typedef struct hlo_window_dim {
  int64_t size, stride, pad_low, pad_high, lhs_dilate, rhs_dilate;
  bool reversal;
} hlo_window_dim;

typedef struct hlo_window {
  int rank;
  hlo_window_dim dims[HLO_MAX_RANK];
} hlo_window;

/* dim_labels=b01f_01io->b01f, decoded into dimension numbers. */
typedef struct hlo_conv_dims {
  int spatial_count;
  int64_t input_batch, input_feature, input_spatial[HLO_MAX_RANK];
  int64_t kernel_input_feature, kernel_output_feature, kernel_spatial[HLO_MAX_RANK];
  int64_t output_batch, output_feature, output_spatial[HLO_MAX_RANK];
} hlo_conv_dims;

typedef struct hlo_dot_dims {
  hlo_ints lhs_batch, lhs_contracting, rhs_batch, rhs_contracting;
} hlo_dot_dims;

typedef struct hlo_gather_dims {
  hlo_ints offset_dims, collapsed_slice_dims, start_index_map;
  hlo_ints operand_batching_dims, start_indices_batching_dims;
  int64_t index_vector_dim;
  bool indices_are_sorted;
} hlo_gather_dims;

typedef struct hlo_scatter_dims {
  hlo_ints update_window_dims, inserted_window_dims, scatter_dims_to_operand_dims;
  hlo_ints input_batching_dims, scatter_indices_batching_dims;
  int64_t index_vector_dim;
  bool indices_are_sorted, unique_indices;
} hlo_scatter_dims;

/* padding=0_0x1_1_0: per dim low, high, interior. */
typedef struct hlo_padding {
  int rank;
  int64_t low[HLO_MAX_RANK], high[HLO_MAX_RANK], interior[HLO_MAX_RANK];
} hlo_padding;

/* A constant's value: dense row-major data in the shape's element type, or, for types latch
 * does not compute with, the value text as written. Tuples hold one literal per element. */
typedef struct hlo_literal {
  hlo_shape shape;
  void *data;           /* hlo_shape_bytes(&shape) bytes; NULL for tuples and raw_text */
  bool elided;          /* written as {...}: data was filled deterministically */
  const char *raw_text; /* the '(...)' payload for uncomputable types, else NULL */
  struct hlo_literal *elements; /* tuple_count literals when shape is a tuple */
} hlo_literal;

/* An attribute latch does not interpret, kept verbatim so printing loses nothing. */
typedef struct hlo_raw_attr {
  const char *name;
  const char *value;
} hlo_raw_attr;

typedef struct hlo_comp hlo_comp;
typedef struct hlo_module hlo_module;

typedef struct hlo_instr {
  /* (Fields are ordered so that none leaves a hole: a loaded module's instructions are most
   * of the pages its load writes, runtime/cpu/deserialize_module.c.) */
  hlo_opcode opcode;
  int operand_count;
  const char *name;
  hlo_shape shape;
  struct hlo_instr **operands;
  /* Called computations, in the text's attribute order:
   *   reduce, reduce-window, map, call, sort, scatter, all-reduce: to_apply
   *   fusion: calls; while: condition, body; select-and-scatter: select, scatter
   *   conditional: true, false or the branch_computations list; custom-call: called_computations */
  hlo_comp **called;
  int called_count;
  int id; /* index in parent->instrs */
  hlo_comp *parent;
  /* Where this instruction came from, for backends that rebind a compiled graph to other
   * sizes (runtime/backend.h, bind): 0 for none, else 1 + the instruction's position in the
   * module a backend was handed, counted over computations in order, then instructions in
   * order (hlo_module_number_origins). Clones keep it; passes that copy an instruction
   * (inlining) copy it; instructions passes create get 0. Never printed, never hashed. */
  int32_t origin;
  /* Where the parser read it (1-based line and byte column in module->source), for the
   * verifier's messages; 0 when it was built in code. */
  int32_t line, col;
  hlo_direction direction;     /* compare */

  /* Attributes; which ones an opcode uses is in the comments. */
  int64_t parameter_number; /* parameter */
  int64_t index;            /* get-tuple-element index, iota_dimension, feature_index of batch-norm,
                               dimension of get/set-dimension-size, all-gather/all-to-all dimension */
  hlo_ints dimensions;      /* broadcast, transpose, concatenate, reverse, reduce, sort (one),
                               dynamic_slice_sizes for dynamic-slice, all-gather/reduce-scatter */
  hlo_ints slice_starts, slice_limits, slice_strides; /* slice */
  hlo_padding *padding;     /* pad */
  hlo_window *window;       /* convolution, reduce-window, select-and-scatter */
  hlo_conv_dims *conv;      /* convolution */
  int64_t feature_group_count, batch_group_count; /* convolution; 1 when absent */
  hlo_dot_dims *dot;        /* dot */
  hlo_gather_dims *gather;  /* gather */
  hlo_ints gather_slice_sizes; /* gather slice_sizes */
  hlo_scatter_dims *scatter;   /* scatter */
  hlo_compare_type compare_type; /* compare */
  hlo_rng_algorithm rng_algorithm; /* rng-bit-generator */
  double epsilon;              /* batch-norm-* */
  hlo_rng_distribution rng_distribution; /* rng */
  bool is_stable;              /* sort */
  bool is_composite;           /* call carrying a composite (is_composite=true) */
  int64_t exponent_bits, mantissa_bits;  /* reduce-precision */
  hlo_literal *literal;        /* constant */
  const char *custom_call_target; /* custom-call */
  const char *fusion_kind;        /* fusion: kLoop, kInput, kOutput, kCustom */
  const char *composite_name;     /* its composite.name frontend attribute (is_composite), or NULL */
  hlo_raw_attr *raw_attrs;        /* everything else, verbatim, in text order */
  int raw_attr_count;
} hlo_instr;

struct hlo_comp {
  const char *name;
  hlo_module *module;
  int instr_count, instr_capacity;
  hlo_instr **instrs; /* operands before users */
  hlo_instr *root;
  int param_count;
  hlo_instr **params; /* by parameter number */
  bool is_entry;
  int id; /* index in module->comps */
};

struct hlo_module {
  hlo_arena arena;
  const char *name;
  const char *source; /* the file the parser read it from (messages only), or NULL */
  int comp_count, comp_capacity;
  hlo_comp **comps; /* callees before callers */
  hlo_comp *entry;
  int raw_attr_count;
  hlo_raw_attr *raw_attrs; /* header attributes other than entry_computation_layout */
  int64_t name_counter; /* build.c: next suffix for generated names; 0 until first used */
};

/* NULL when memory runs out. The adders below return NULL (or false) when memory runs out
 * and leave module->arena.failed set; hlo_module_check_memory turns that flag into
 * HLO_ERR_INTERNAL "out of memory <what>" (HLO_OK while it is clear). */
hlo_module *hlo_module_new(const char *name);
void hlo_module_free(hlo_module *module);
hlo_status hlo_module_check_memory(const hlo_module *module, const char *what, hlo_diag *diag);
/* Sets the header attribute name (replica_count, num_partitions, ...) to value, adding it
 * when absent; false when memory runs out (module->arena.failed set). */
bool hlo_module_set_attr(hlo_module *module, const char *name, const char *value);
hlo_comp *hlo_module_add_comp(hlo_module *module, const char *name);
hlo_comp *hlo_module_find_comp(const hlo_module *module, const char *name);
/* Appends a bare instruction (no shape, no attributes) to comp; the caller fills it in.
 * Operands are copied. Defaults: feature/batch group counts 1, index_vector_dim set by
 * the gather/scatter owner. */
hlo_instr *hlo_comp_append(hlo_comp *comp, hlo_opcode opcode, const char *name,
                           int operand_count, hlo_instr *const *operands);
/* Registers instr at the end of comp (its parent and id), for a caller that allocated it in
 * comp's module's arena and fills it in itself (a decoder); false when memory runs out. */
bool hlo_comp_add(hlo_comp *comp, hlo_instr *instr);
/* Registers a parameter instruction in comp->params (grows the table); false when memory
 * runs out. */
bool hlo_comp_set_param(hlo_comp *comp, hlo_instr *param);
/* Reorders comp->instrs so operands come before users; false (with diag) on a cycle, or when
 * memory runs out (HLO_ERR_INTERNAL, module->arena.failed set: the order is unchanged). */
bool hlo_comp_sort(hlo_comp *comp, hlo_diag *diag);
/* Reorders module->comps so callees come before callers; false on recursion or out of memory. */
bool hlo_module_sort(hlo_module *module, hlo_diag *diag);
hlo_ints hlo_ints_copy(hlo_arena *arena, int count, const int64_t *values);
bool hlo_ints_equal(const hlo_ints *a, const hlo_ints *b);
/* The instruction whose bytes instr shows unchanged: instr itself, or the operand under its
 * one-operand reshapes, bitcasts and copies. */
const hlo_instr *hlo_under_views(const hlo_instr *instr);
/* A raw attribute's value by name, or NULL. */
const char *hlo_instr_raw_attr(const hlo_instr *instr, const char *name);
/* Points every use of from (operands of comp's instructions, and the root) at to. */
void hlo_replace_uses(hlo_comp *comp, hlo_instr *from, hlo_instr *to);

/* ---- instr_attrs.c ---- */
/* Sets every instruction's origin to 1 + its position (see hlo_instr.origin); returns the
 * count of instructions. */
int32_t hlo_module_number_origins(hlo_module *module);
/* Whether a and b agree on every attribute other than their shapes and operands (opcode,
 * called computations by index, dimensions, windows, literals, raw attributes, ...).
 * sizes_too: also compare the size attributes a graph instantiated at other sizes may
 * change (slice starts and limits). On a difference, *which names the attribute. */
bool hlo_instr_same_attrs(const hlo_instr *a, const hlo_instr *b, bool sizes_too, const char **which);

/* ---- build.c ---- */
/* The builder: capture code creates instructions through it. Each function sets the
 * instruction's attributes, infers its shape and checks its called computations; on invalid
 * input it returns NULL with diag naming the op and the shapes, and comp is left unchanged.
 * Generated names are "<opcode>.<n>", unique within the module. Computations must come
 * before their callers in module->comps: create callees first, or call hlo_module_sort
 * before verifying or printing. */

/* A new computation named name (made unique) or a generated name when NULL; entry makes
 * it the module's entry. */
/* A name no instruction or computation of module has: base, a dot and a fresh number. NULL
 * when memory runs out, as for hlo_build_computation (module->arena.failed set). */
const char *hlo_fresh_name(hlo_module *module, const char *base);
hlo_comp *hlo_build_computation(hlo_module *module, const char *name, bool entry);
/* A computation (x, y) -> op(x, y) on scalars of dtype, for reduce and friends, placed first
 * in the module so it precedes every caller. NULL when op is not a binary elementwise op or
 * dtype is not an array type, or when memory runs out (module->arena.failed set). */
hlo_comp *hlo_build_scalar_reducer(hlo_module *module, hlo_opcode op, hlo_dtype dtype);
/* The same, but an identical reducer the module already has is returned instead of a new
 * one (reducers are pure, so reduces may share them, as XLA's own modules do). */
hlo_comp *hlo_shared_scalar_reducer(hlo_module *module, hlo_opcode op, hlo_dtype dtype);
/* A computation (x, y) -> compare(x, y) with direction dir on scalars of dtype (a
 * select-and-scatter's select), an identical one the module has or a new one placed first;
 * NULL for a non-number dtype or when memory runs out (module->arena.failed set). */
hlo_comp *hlo_shared_scalar_compare(hlo_module *module, hlo_direction dir, hlo_dtype dtype);
/* The op of a computation whose root is one add, multiply, maximum, minimum, and or or of
 * its two scalar parameters (what hlo_build_scalar_reducer makes), so a kernel can run it
 * without a call per element; HLO_OP_COUNT for any other computation. */
hlo_opcode hlo_simple_reducer(const hlo_comp *comp);
/* Makes root the computation's result; it must belong to comp. */
hlo_status hlo_comp_set_root(hlo_comp *comp, hlo_instr *root, hlo_diag *diag);

/* name NULL generates one. The number must not be taken yet. */
hlo_instr *hlo_build_parameter(hlo_comp *comp, int64_t number, const hlo_shape *shape,
                               const char *name, hlo_diag *diag);
/* Copies the literal (data, tuple elements, raw text) into the module. */
hlo_instr *hlo_build_constant(hlo_comp *comp, const hlo_literal *literal, hlo_diag *diag);
/* value converted to dtype (rounded to nearest for halves; pred is value != 0). */
hlo_instr *hlo_build_constant_scalar(hlo_comp *comp, hlo_dtype dtype, double value, hlo_diag *diag);

hlo_instr *hlo_build_unary(hlo_comp *comp, hlo_opcode op, hlo_instr *x, hlo_diag *diag);
hlo_instr *hlo_build_binary(hlo_comp *comp, hlo_opcode op, hlo_instr *a, hlo_instr *b, hlo_diag *diag);
hlo_instr *hlo_build_compare(hlo_comp *comp, hlo_direction direction, hlo_instr *a, hlo_instr *b,
                             hlo_diag *diag);
hlo_instr *hlo_build_select(hlo_comp *comp, hlo_instr *pred, hlo_instr *on_true, hlo_instr *on_false,
                            hlo_diag *diag);
hlo_instr *hlo_build_clamp(hlo_comp *comp, hlo_instr *min, hlo_instr *x, hlo_instr *max, hlo_diag *diag);
hlo_instr *hlo_build_convert(hlo_comp *comp, hlo_instr *x, hlo_dtype dtype, hlo_diag *diag);

/* Result dims[rank]; operand dim i goes to result dim dimensions[i] (x's rank entries). */
hlo_instr *hlo_build_broadcast(hlo_comp *comp, hlo_instr *x, int rank, const int64_t *dims,
                               const int64_t *dimensions, hlo_diag *diag);
hlo_instr *hlo_build_reshape(hlo_comp *comp, hlo_instr *x, int rank, const int64_t *dims, hlo_diag *diag);
/* Result dim i is operand dim permutation[i] (x's rank entries). */
hlo_instr *hlo_build_transpose(hlo_comp *comp, hlo_instr *x, const int64_t *permutation, hlo_diag *diag);
/* x with its elements in reverse order along dims[0..count). */
hlo_instr *hlo_build_reverse(hlo_comp *comp, hlo_instr *x, int count, const int64_t *dims, hlo_diag *diag);
/* x's rank entries each; strides NULL means all 1. */
hlo_instr *hlo_build_slice(hlo_comp *comp, hlo_instr *x, const int64_t *starts, const int64_t *limits,
                           const int64_t *strides, hlo_diag *diag);
hlo_instr *hlo_build_concatenate(hlo_comp *comp, int count, hlo_instr *const *operands,
                                 int64_t dimension, hlo_diag *diag);
hlo_instr *hlo_build_pad(hlo_comp *comp, hlo_instr *x, hlo_instr *value, const hlo_padding *padding,
                         hlo_diag *diag);
hlo_instr *hlo_build_iota(hlo_comp *comp, hlo_dtype dtype, int rank, const int64_t *dims,
                          int64_t iota_dimension, hlo_diag *diag);
/* The result takes lhs's element type. */
hlo_instr *hlo_build_dot(hlo_comp *comp, hlo_instr *lhs, hlo_instr *rhs, const hlo_dot_dims *dims,
                         hlo_diag *diag);
hlo_instr *hlo_build_convolution(hlo_comp *comp, hlo_instr *lhs, hlo_instr *rhs, const hlo_window *window,
                                 const hlo_conv_dims *dims, int64_t feature_group_count,
                                 int64_t batch_group_count, hlo_diag *diag);
/* The same with the result's element type given (XLA's preferred element type: bf16 operands,
 * an f32 result); HLO_INVALID: lhs's. */
hlo_instr *hlo_build_dot_to(hlo_comp *comp, hlo_instr *lhs, hlo_instr *rhs, const hlo_dot_dims *dims,
                            hlo_dtype result, hlo_diag *diag);
hlo_instr *hlo_build_convolution_to(hlo_comp *comp, hlo_instr *lhs, hlo_instr *rhs, const hlo_window *window,
                                    const hlo_conv_dims *dims, int64_t feature_group_count,
                                    int64_t batch_group_count, hlo_dtype result, hlo_diag *diag);
/* Reduces dims[dim_count] of x with reducer, starting from the scalar init. */
hlo_instr *hlo_build_reduce(hlo_comp *comp, hlo_instr *x, hlo_instr *init, int dim_count,
                            const int64_t *dims, hlo_comp *reducer, hlo_diag *diag);
hlo_instr *hlo_build_reduce_window(hlo_comp *comp, hlo_instr *x, hlo_instr *init, const hlo_window *window,
                                   hlo_comp *reducer, hlo_diag *diag);
/* slice_sizes has one entry per operand dim. */
/* select-and-scatter(operand, source, init): select picks one element of each window of
 * operand, scatter adds the source element of that window into it (XLA's max pool gradient). */
hlo_instr *hlo_build_select_and_scatter(hlo_comp *comp, hlo_instr *operand, hlo_instr *source, hlo_instr *init,
                                       const hlo_window *window, hlo_comp *select, hlo_comp *scatter, hlo_diag *diag);
hlo_instr *hlo_build_gather(hlo_comp *comp, hlo_instr *operand, hlo_instr *indices,
                            const hlo_gather_dims *dims, const int64_t *slice_sizes, hlo_diag *diag);
hlo_instr *hlo_build_scatter(hlo_comp *comp, hlo_instr *operand, hlo_instr *indices, hlo_instr *updates,
                             const hlo_scatter_dims *dims, hlo_comp *combiner, hlo_diag *diag);
hlo_instr *hlo_build_tuple(hlo_comp *comp, int count, hlo_instr *const *elements, hlo_diag *diag);
/* s32[]: the size of x's dimension, read when the graph runs (so a graph rebound to other
 * sizes computes the new one). */
hlo_instr *hlo_build_get_dimension_size(hlo_comp *comp, hlo_instr *x, int64_t dimension, hlo_diag *diag);
hlo_instr *hlo_build_gte(hlo_comp *comp, hlo_instr *tuple, int64_t index, hlo_diag *diag);
/* all-reduce of x over every replica (replica_groups={}) with reducer; one operand. */
hlo_instr *hlo_build_all_reduce(hlo_comp *comp, hlo_instr *x, hlo_comp *reducer, hlo_diag *diag);
hlo_instr *hlo_build_call(hlo_comp *comp, hlo_comp *callee, int count, hlo_instr *const *operands,
                          hlo_diag *diag);

/* ---- infer.c ---- */
/* Shape inference: the shape an instruction must have, computed from its operands' shapes,
 * its attributes and its called computations, following XLA's operation semantics. */

enum {
  /* Also accept what XLA's MLIR importer accepts although XLA's verifier does not: a
   * convolution window whose sizes differ from the kernel's spatial dims, a reduce whose init
   * values are not scalars, called computations that return a one-element tuple instead of a
   * scalar. The verifier uses it only for computations the entry never reaches. */
  HLO_INFER_IMPORTER = 1u << 0,
};

/* Fills *out with the result shape of instr (default layout, tuple elements in arena).
 * Ops whose result cannot be derived (parameter, constant, iota, rng, custom-call, infeed,
 * recv, async ops, ...) give their declared instr->shape. Ops whose result element type
 * is chosen by the instruction (convert, bitcast-convert, dot and convolution's preferred
 * type) and ops whose result dims are chosen by it (broadcast, reshape) read those from
 * instr->shape. Errors name the opcode, the instruction, the mismatch and the operand
 * shapes. */
hlo_status hlo_infer_shape(const hlo_instr *instr, hlo_shape *out, hlo_arena *arena,
                           hlo_diag *diag);
hlo_status hlo_infer_shape_flags(const hlo_instr *instr, unsigned flags, hlo_shape *out,
                                 hlo_arena *arena, hlo_diag *diag);

/* Same element type and dims, layouts ignored, recursively for tuples; an unbounded dim (?)
 * matches any size and a bounded dim compares by its bound. */
bool hlo_shape_compatible(const hlo_shape *a, const hlo_shape *b);

/* Elements a slice [start:limit:stride] takes along one dim (0 <= start <= limit, stride
 * >= 1), computed without overflow for any stride. */
int64_t hlo_slice_size(int64_t start, int64_t limit, int64_t stride);

/* The number of window positions along one dim of size base (after base dilation and
 * padding); false when the window's fields are invalid (size, stride or dilation < 1) or
 * the arithmetic overflows. */
bool hlo_window_output_size(int64_t base, const hlo_window_dim *dim, int64_t *out);

/* Appends " (lhs f32[2,3], rhs f32[4,5])": each operand's role and shape, for messages. */
void hlo_describe_operands(const hlo_instr *instr, hlo_strbuf *sb);

/* The size of one replica group from the raw replica_groups attribute ({{0,1},{2,3}} or
 * the iota form [2,64]<=[128]); 0 when it is absent, empty or not understood. */
int64_t hlo_replica_group_size(const hlo_instr *instr);

/* ---- clone.c ---- */
/* Deep copies of modules, for executables and caches that must outlive the module they were
 * made from. */

/* An independent copy of module (its own arena), equal to it as HLO text. NULL with diag
 * when out of memory. Elided constants stay elided and keep their filled values, since the
 * filler is seeded by the instruction's name. Instructions keep their origins. */
hlo_module *hlo_module_clone(const hlo_module *module, hlo_diag *diag);

/* ---- print.c ---- */
/* Writing the IR as HLO text that XLA's own parser accepts. Printing is deterministic, so
 * print(parse(print(parse(x)))) == print(parse(x)). */

/* The whole module: header with a regenerated entry_computation_layout, then computations
 * callees first, the entry marked ENTRY. */
void hlo_print_module(hlo_strbuf *sb, const hlo_module *module);
/* The same as a malloc'd string (the caller frees it). */
char *hlo_module_to_text(const hlo_module *module);
/* One instruction, "%name = shape opcode(%a, %b), attr=..." without ROOT or indentation. */
void hlo_print_instr(hlo_strbuf *sb, const hlo_instr *instr);
/* A constant's value as it goes between constant( and ): 2.5, {1, 2}, { {1, 2}, {3, 4} },
 * (1, {2, 3}) for tuples. Floats print with the fewest digits that read back to the same
 * bits; pred scalars print true/false and pred arrays 0/1, as XLA prints them. */
void hlo_print_literal(hlo_strbuf *sb, const hlo_literal *literal);

/* The shortest decimal text that reads back (strtof, and strtod then rounding) to exactly
 * value; inf, -inf, nan, -nan, and nan(0x..) for a NaN with a non-default payload. */
void hlo_print_f32(hlo_strbuf *sb, float value);
void hlo_print_f64(hlo_strbuf *sb, double value);

/* ---- parse.c ---- */
/* Reading HLO text as XLA prints it (see shared/HLO-TEXT.md) into the IR of ir.h.
 *
 * What a parsed module looks like:
 * - Attributes ir.h has a field for are decoded into it; every other one is in raw_attrs with
 *   its value text exactly as written. Header attributes go to module->raw_attrs, except
 *   entry_computation_layout (the printer derives it).
 * - instr->called holds computations in attribute order, except that fixed roles keep fixed
 *   places whatever the text's order: while (condition, body), select-and-scatter (select,
 *   scatter), conditional (true, false). An inline body `to_apply={...}` becomes a
 *   computation named "<instruction>.<attribute>" (with ".N" added if that is taken).
 * - Operands may be used before their definition; instructions are sorted operands first,
 *   computations callees first. Without ROOT the last instruction is the root; without ENTRY
 *   the last top-level computation is the entry; without HloModule the module is named after
 *   its entry.
 * - dot, gather and scatter always have their dims structs; a gather or scatter that does not
 *   write index_vector_dim gets the rank of its indices. */

/* Parses one module from text (which need not be NUL-terminated). filename is used in
 * messages. NULL on error, with diag->message "FILE:LINE:COL: error: ..." and diag->status
 * HLO_ERR_INPUT. */
hlo_module *hlo_parse_module(const char *text, size_t len, const char *filename, hlo_diag *diag);

/* Parses a file that may hold several modules separated by a line `// -----`; returns the
 * count (>= 1) and a malloc'd array of modules in *modules (free each module, then the
 * array), or -1 with diag. */
int hlo_parse_modules(const char *text, size_t len, const char *filename, hlo_module ***modules,
                      hlo_diag *diag);

/* Reads a whole file and parses it (multi-module aware). Same returns. A directory is
 * HLO_ERR_INPUT; a failed read HLO_ERR_INTERNAL. */
int hlo_parse_file(const char *path, hlo_module ***modules, hlo_diag *diag);

/* One module of a multi-module file parsed on its own: the module, or NULL and why. */
typedef struct hlo_parsed {
  hlo_module *module;
  hlo_diag diag;
} hlo_parsed;
/* Reads a whole file and parses each module separately, so a syntax error in one is
 * reported without failing the others: returns the count of modules (>= 1) and a malloc'd
 * array of results (free with hlo_parsed_free), or -1 with diag when the file cannot be
 * read or holds no module. */
int hlo_parse_file_each(const char *path, hlo_parsed **results, hlo_diag *diag);
void hlo_parsed_free(hlo_parsed *results, int count);

/* ---- parse_literal.c ---- */
/* Deterministic filler for elided constants `constant({...})`: fills literal->data (already
 * allocated for its shape) from seed, recursing into tuple elements. Values are small and
 * finite: floats in [-1, 1), integers in [0, 8), pred alternating. The parser seeds it with
 * hlo_fill_seed(instruction name). Literals without data (uncomputable types) are left alone.
 * Elided constants over 1 GiB are a parse error rather than a huge allocation. */
void hlo_fill_elided(hlo_literal *literal, uint64_t seed);
/* The seed the parser uses for an instruction's elided constant: a hash of its name. */
uint64_t hlo_fill_seed(const char *name);

/* ---- verify.c ---- */
/* The verifier: a module's structure is sound and every instruction's declared shape is
 * the one its operands and attributes give. */

/* Checks the module: an entry exists, every computation has a root, parameter numbers are
 * 0..n-1, operands live in the same computation and come before their users, computations
 * are called only by later ones (so never recursively), instruction names are unique per
 * computation, called computations take and return what their caller passes and expects,
 * and each instruction's declared shape equals its inferred shape (layouts ignored).
 * Computations the entry never reaches are checked with XLA's importer's leniency
 * (HLO_INFER_IMPORTER). Errors name the computation and the instruction. */
hlo_status hlo_verify_module(const hlo_module *module, hlo_diag *diag);
/* The same for a module a decoder built checking each link as it read it (operands earlier
 * instructions of their own computation, called computations earlier ones, each instruction
 * registered at its position: runtime/cpu/deserialize_module.c), which those checks would
 * only repeat: layouts, parameter tables, calls and shapes as above; names are not compared
 * (a serialized executable's module is not printed for parsing, and no kernel reads them). */
hlo_status hlo_verify_decoded(const hlo_module *module, hlo_diag *diag);

/* The checks on one instruction's called computations: a reducer takes 2N scalars of the
 * init types and returns N of them, a while condition takes the loop state and returns
 * pred[], a call's parameters match its operands, and so on. flags as in infer.h. Call it
 * after hlo_infer_shape accepted instr: it relies on the operand counts being right. */
hlo_status hlo_verify_calls(const hlo_instr *instr, unsigned flags, hlo_diag *diag);

/* The last of hlo_verify_module's checks on one computation alone, for the instructions i
 * with only[i] set (only NULL: all): each one's declared shape is its inferred shape, and its
 * called computations fit it. For a computation whose links are already known sound but
 * whose shapes were rewritten: a cpu executable bound to other sizes shares called
 * computations with another module, and leaves out the instructions whose shape, operand
 * shapes and slice bounds are the compiled ones' (they infer as they did at compile time). */
hlo_status hlo_verify_some_shapes(const hlo_comp *comp, const bool *only, hlo_diag *diag);

/* ---- pass_*.c ---- */
/* Graph-rewriting passes over a module: dead-code elimination, common-subexpression
 * elimination, algebraic simplification. Each keeps the module valid (verifiable, printable)
 * and returns how many rewrites it made, so a driver can run them to a fixed point and tests
 * can see what happened. Rewrites never change a computation's parameters or result shape.
 * Out of memory: a pass skips the rewrite it could not make (less work, still correct);
 * where that could leave the module invalid it sets module->arena.failed, so the driver
 * checks hlo_module_check_memory after its passes. */

/* Removes instructions the root does not depend on (parameters stay: they are the
 * computation's signature). Returns the number removed. */
int hlo_pass_dce(hlo_module *module);
/* Makes later instructions equal to an earlier one (same opcode, shape, operands and
 * attributes) use the earlier one; the duplicates are left dead for DCE. Instructions with
 * effects or randomness (rng, custom-call, infeed, collectives, ...) are never merged.
 * Returns the number of instructions replaced. */
int hlo_pass_cse(hlo_module *module);
/* Rewrites exact identities: x*1, x+0 and x-0 for integers, convert to the same type,
 * no-op reshape/broadcast/transpose/slice, reshape of reshape, transpose of transpose,
 * a transpose that moves only size-1 dims -> reshape, and folds scalar arithmetic on constants. Returns the number of rewrites. */
int hlo_pass_simplify(hlo_module *module);
/* A transpose that moves only size-1 dims (the others keep their order), with default
 * layouts: the same bytes in the same order, a reshape. simplify makes it one; binding a
 * compiled graph to other sizes must check that it still is one. */
bool hlo_transpose_is_bitcast(const hlo_instr *transpose);
/* Replaces each call by a copy of its computation's instructions, parameters mapped to the
 * call's operands (the called computation itself stays; DCE leaves the dead call). Backends
 * then run the callee's ops with their own kernels: the cpu backend ran calls, such as the
 * capture layer's layer_norm and softmax composites, op by op on the reference evaluator.
 * Returns the number of calls inlined. */
int hlo_pass_inline_calls(hlo_module *module);
/* inline_calls once, then simplify, cse, dce until nothing changes (bounded). Returns the
 * total rewrites. */
int hlo_pass_run_all(hlo_module *module);

/* ---- choices.c ---- */
/* Optimization choices, counted and switchable (the file's opening says why): passes and
 * backends ask hlo_choice before each optimization they may make. */

typedef struct hlo_choice_ledger {
  int64_t limit;     /* the choices taken at most, in the order asked; -1: all */
  const char *avoid; /* "KIND@NAME,KIND,...": refused (KIND alone: all of that kind); NULL: none */
  int64_t asked;     /* choices asked so far */
  /* Told each choice and the answer; NULL: nobody. */
  void (*log)(void *context, const char *kind, const char *name, bool taken);
  void *log_context;
} hlo_choice_ledger;

/* Installs ledger on this thread (NULL: none, every choice taken); returns the previous. */
hlo_choice_ledger *hlo_choices_install(hlo_choice_ledger *ledger);
/* Whether to make the choice of kind ("fusion", "fold_affine") on the instruction name. */
bool hlo_choice(const char *kind, const char *name);

#endif
