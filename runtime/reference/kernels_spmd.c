/* Collectives across processes: each rank of the world (runtime/comm.c) is one device of a
 * module with replica_count * num_partitions devices, device id = replica * num_partitions +
 * partition (XLA's flattened id), and each collective moves its data through MPI.
 *
 * Who takes part follows XLA's group modes: without channel_id the groups hold replica ids
 * (cross-replica: the members share this device's partition); all-to-all, collective-permute
 * and collective-broadcast with a channel_id hold partition ids (cross-partition); all-reduce,
 * all-gather and reduce-scatter with a channel_id hold replica ids and take every partition of
 * each (cross-replica-and-partition), or, with use_global_device_ids=true, flattened device
 * ids. replica_groups come as a list ({{0,1},{2,3}}; {} is all) or in the iota form
 * [G,S]<=[dims]T(perm).
 *
 * all-reduce with add, multiply, maximum or minimum of its two parameters, on a type MPI has,
 * is an MPI_Allreduce with that op (reduce-scatter likewise); any other reducer gathers every
 * member's operand and folds them with the computation, in group order. The async pairs
 * all-reduce-start, all-gather-start and collective-permute-start start non-blocking MPI
 * transfers into their result and return; the matching -done waits for them (and lays out a
 * gather's blocks), so the ops between the two run while the data moves. Every collective is
 * agreed by all ranks first (rt_comm_agree), so a rank at another op or another shape is an
 * error naming the op before any data moves. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reference.h"

typedef enum { MODE_REPLICA, MODE_PARTITION, MODE_REPLICA_AND_PARTITION, MODE_FLATTENED } group_mode;

/* This device and the collective being run. */
typedef struct spmd {
  rt_eval *eval;
  const hlo_instr *instr;
  rt_comm *comm;
  int replicas, partitions, rank, replica, partition;
  char what[200]; /* "all-reduce %name", for messages */
} spmd;

/* Groups of device ids, parsed or expanded; every device in exactly one group. */
typedef struct groups {
  int count, total;
  int *sizes, *members;
  int mine, index; /* this rank's group and its place in it */
} groups;

static void groups_free(groups *g) {
  free(g->sizes);
  free(g->members);
  *g = (groups){0};
}

static const char *module_attr(const hlo_module *module, const char *name) {
  for (int i = 0; module && i < module->raw_attr_count; i++)
    if (strcmp(module->raw_attrs[i].name, name) == 0) return module->raw_attrs[i].value;
  return NULL;
}

static int module_count(const hlo_module *module, const char *name) {
  const char *text = module_attr(module, name);
  long long n = text ? strtoll(text, NULL, 10) : 1;
  return n > 0 && n < 1 << 20 ? (int)n : 1;
}

bool rt_module_is_spmd(const hlo_module *module) {
  return module_count(module, "replica_count") * (long long)module_count(module, "num_partitions") > 1;
}

static hlo_status fail(spmd *s, hlo_status code, const char *format, const char *detail) {
  return rt_kernel_fail(s->eval, s->instr, code, format, detail);
}

static hlo_status out_of_memory(spmd *s) { return fail(s, HLO_ERR_INTERNAL, "out of memory%s", ""); }

/* ---- replica_groups ---- */

/* Reads up to max numbers inside the brackets at *p ("[1,2,3]" or "(1,0)"); -1 if malformed. */
static int read_list(const char **p, char close, long long *out, int max) {
  const char *q = *p + 1;
  int n = 0;
  while (*q && *q != close) {
    if (isdigit((unsigned char)*q)) {
      char *end;
      long long v = strtoll(q, &end, 10);
      if (n == max) return -1;
      out[n++] = v;
      q = end;
    } else if (*q == ',' || isspace((unsigned char)*q)) {
      q++;
    } else {
      return -1;
    }
  }
  if (*q != close) return -1;
  *p = q + 1;
  return n;
}

static bool alloc_groups(groups *g, int count, int total) {
  g->count = count, g->total = total;
  g->sizes = calloc((size_t)count + 1, sizeof(int));
  g->members = calloc((size_t)total + 1, sizeof(int));
  return g->sizes && g->members;
}

/* [G,S]<=[d0,d1,...]T(p0,p1,...): the iota over dims, transposed by perm, cut into G groups of S. */
static bool parse_iota(const char *text, groups *g) {
  long long shape[2], dims[8], perm[8];
  const char *p = text;
  if (read_list(&p, ']', shape, 2) != 2 || strncmp(p, "<=", 2) != 0) return false;
  p += 2;
  int rank = *p == '[' ? read_list(&p, ']', dims, 8) : -1;
  if (rank <= 0) return false;
  for (int i = 0; i < rank; i++) perm[i] = i;
  if (*p == 'T' && (p++, *p != '(' || read_list(&p, ')', perm, 8) != rank)) return false;
  long long total = 1;
  for (int i = 0; i < rank; i++) total *= dims[i];
  if (shape[0] <= 0 || shape[1] <= 0 || shape[0] * shape[1] != total || total > 1 << 20) return false;
  if (!alloc_groups(g, (int)shape[0], (int)total)) return false;
  for (int i = 0; i < g->count; i++) g->sizes[i] = (int)shape[1];
  long long coords[8] = {0}, tdims[8];
  for (int i = 0; i < rank; i++) {
    if (perm[i] < 0 || perm[i] >= rank) return false;
    tdims[i] = dims[perm[i]];
  }
  for (long long k = 0; k < total; k++) { /* coords run over the transposed dims in order */
    long long id = 0, orig[8];
    for (int i = 0; i < rank; i++) orig[perm[i]] = coords[i];
    for (int i = 0; i < rank; i++) id = id * dims[i] + orig[i];
    g->members[k] = (int)id;
    for (int i = rank - 1; i >= 0 && ++coords[i] == tdims[i]; i--) coords[i] = 0;
  }
  return true;
}

/* {{0,1},{2,3}}; an empty list leaves g->count 0 (every id, one group). */
static bool parse_list(const char *text, groups *g) {
  int count = 0, total = 0;
  for (const char *p = text; *p; p++) {
    if (*p == '{' && p != text) count++;
    if (isdigit((unsigned char)*p) && !isdigit((unsigned char)p[1])) total++;
  }
  if (count == 0) return true;
  if (!alloc_groups(g, count, total)) return false;
  int group = -1, n = 0;
  for (const char *p = text + 1; *p;) {
    if (*p == '{') group++, p++;
    else if (isdigit((unsigned char)*p)) {
      char *end;
      g->members[n++] = (int)strtol(p, &end, 10);
      g->sizes[group < 0 ? 0 : group]++;
      p = end;
    } else p++;
  }
  return group == count - 1;
}

/* The groups as written, in ids of the mode; count 0: one group of every id. */
static hlo_status parse_groups(spmd *s, groups *ids) {
  const char *text = hlo_instr_raw_attr(s->instr, "replica_groups");
  *ids = (groups){0};
  if (!text) return HLO_OK;
  while (isspace((unsigned char)*text)) text++;
  bool ok = *text == '[' ? parse_iota(text, ids) : *text == '{' ? parse_list(text, ids) : false;
  if (ok) return HLO_OK;
  groups_free(ids);
  return fail(s, HLO_ERR_INPUT, "replica_groups=%s: not a list of groups or an iota form", text);
}

static group_mode mode_of(spmd *s, hlo_status *status) {
  bool channel = hlo_instr_raw_attr(s->instr, "channel_id") != NULL;
  const char *global = hlo_instr_raw_attr(s->instr, "use_global_device_ids");
  bool flattened = global && strcmp(global, "true") == 0;
  *status = HLO_OK;
  switch (s->instr->opcode) {
    case HLO_OP_ALL_TO_ALL: case HLO_OP_COLLECTIVE_PERMUTE: case HLO_OP_COLLECTIVE_PERMUTE_START:
    case HLO_OP_COLLECTIVE_BROADCAST:
      return channel ? MODE_PARTITION : MODE_REPLICA;
    default:
      if (!channel && flattened)
        *status = fail(s, HLO_ERR_INPUT, "use_global_device_ids=true needs a channel_id%s", "");
      return !channel ? MODE_REPLICA : flattened ? MODE_FLATTENED : MODE_REPLICA_AND_PARTITION;
  }
}

/* Appends device to the expanded groups, checking it is in range and new. */
static bool add_member(spmd *s, groups *g, int *n, bool *seen, int device) {
  if (device < 0 || device >= s->replicas * s->partitions || seen[device]) return false;
  seen[device] = true;
  if (device == s->rank) g->mine = g->count, g->index = g->sizes[g->count];
  g->members[(*n)++] = device;
  g->sizes[g->count]++;
  return true;
}

/* The device groups of the collective, from its ids and mode. */
static hlo_status device_groups(spmd *s, groups *out) {
  hlo_status status;
  group_mode mode = mode_of(s, &status);
  groups ids;
  if (status != HLO_OK || parse_groups(s, &ids) != HLO_OK) return s->eval->diag->status;
  int R = s->replicas, P = s->partitions, devices = R * P;
  int id_count = mode == MODE_PARTITION ? P : mode == MODE_FLATTENED ? devices : R;
  if (ids.count == 0) { /* every id in one group */
    if (!alloc_groups(&ids, 1, id_count)) return groups_free(&ids), out_of_memory(s);
    ids.sizes[0] = id_count;
    for (int i = 0; i < id_count; i++) ids.members[i] = i;
  }
  int copies = mode == MODE_REPLICA ? P : mode == MODE_PARTITION ? R : 1;
  bool *seen = calloc((size_t)devices, sizeof(bool));
  bool ok = seen && alloc_groups(out, ids.count * copies, devices);
  out->count = 0;
  int n = 0;
  for (int c = 0; ok && c < copies; c++)
    for (int g = 0, at = 0; ok && g < ids.count; at += ids.sizes[g++], out->count++)
      for (int i = 0; ok && i < ids.sizes[g]; i++) {
        int id = ids.members[at + i];
        if (id < 0 || id >= id_count) ok = false;
        else if (mode == MODE_REPLICA) ok = add_member(s, out, &n, seen, id * P + c);
        else if (mode == MODE_PARTITION) ok = add_member(s, out, &n, seen, c * P + id);
        else if (mode == MODE_FLATTENED) ok = add_member(s, out, &n, seen, id);
        else
          for (int p = 0; ok && p < P; p++) ok = add_member(s, out, &n, seen, id * P + p);
      }
  ok = ok && n == devices;
  free(seen);
  groups_free(&ids);
  if (ok) return HLO_OK;
  groups_free(out);
  return fail(s, HLO_ERR_INPUT, "replica_groups=%s: the groups do not hold every device exactly once",
              hlo_instr_raw_attr(s->instr, "replica_groups") ? hlo_instr_raw_attr(s->instr, "replica_groups") : "{}");
}

static rt_comm_groups comm_groups(const groups *g) {
  return (rt_comm_groups){.count = g->count, .sizes = g->sizes, .members = g->members};
}

/* ---- moving data ---- */

static int64_t value_bytes(const rt_value *v) { return v->count * (int64_t)hlo_dtype_size(v->shape.dtype); }

/* Elements before and bytes after dim d of shape. */
static void around(const hlo_shape *shape, int d, int64_t *outer, int64_t *inner) {
  *outer = 1, *inner = (int64_t)hlo_dtype_size(shape->dtype);
  for (int i = 0; i < shape->rank; i++) {
    if (i < d) *outer *= shape->dims[i];
    if (i > d) *inner *= shape->dims[i];
  }
}

/* whole (dim d = S * c) -> S contiguous blocks, block j holding slice j along d. */
static void pack(const char *whole, char *blocks, int S, int64_t outer, int64_t chunk) {
  for (int j = 0; j < S; j++)
    for (int64_t o = 0; o < outer; o++)
      memcpy(blocks + ((int64_t)j * outer + o) * chunk, whole + (o * S + j) * chunk, (size_t)chunk);
}

static void unpack(const char *blocks, char *whole, int S, int64_t outer, int64_t chunk) {
  for (int j = 0; j < S; j++)
    for (int64_t o = 0; o < outer; o++)
      memcpy(whole + (o * S + j) * chunk, blocks + ((int64_t)j * outer + o) * chunk, (size_t)chunk);
}

static int dim_attribute(const hlo_instr *instr) {
  return (int)(instr->dimensions.count > 0 ? instr->dimensions.values[0] : instr->index);
}

/* add, multiply, maximum or minimum of the reducer's two parameters, or false. */
static bool mpi_reducer(const hlo_instr *instr, rt_comm_reduce *op) {
  const hlo_comp *comp = instr->called_count > 0 ? instr->called[0] : NULL;
  const hlo_instr *root = comp ? comp->root : NULL;
  if (!root || root->operand_count != 2 || comp->param_count != 2) return false;
  if (!((root->operands[0] == comp->params[0] && root->operands[1] == comp->params[1]) ||
        (root->operands[0] == comp->params[1] && root->operands[1] == comp->params[0])))
    return false;
  switch (root->opcode) {
    case HLO_OP_ADD: *op = RT_COMM_SUM; return true;
    case HLO_OP_MULTIPLY: *op = RT_COMM_PROD; return true;
    case HLO_OP_MAXIMUM: *op = RT_COMM_MAX; return true;
    case HLO_OP_MINIMUM: *op = RT_COMM_MIN; return true;
    default: return false;
  }
}

static rt_value *scalar(hlo_dtype dtype, const char *bytes) {
  rt_value *v = rt_value_new_array(dtype, 0, NULL);
  if (v) memcpy(v->data, bytes, hlo_dtype_size(dtype));
  return v;
}

/* out[e] = fold of the reducer over the members' element at offset + e, in group order;
 * gathered holds S members of stride bytes each. */
static hlo_status fold(spmd *s, const char *gathered, int S, int64_t stride, int64_t offset, int64_t count,
                       hlo_dtype dtype, char *out) {
  size_t size = hlo_dtype_size(dtype);
  const hlo_comp *comp = s->instr->called[0];
  for (int64_t e = 0; e < count; e++) {
    rt_value *acc = scalar(dtype, gathered + offset + e * (int64_t)size);
    for (int j = 1; acc && j < S; j++) {
      rt_value *next = scalar(dtype, gathered + (int64_t)j * stride + offset + e * (int64_t)size), *sum = NULL;
      rt_value *pair[2] = {acc, next};
      hlo_status status = next ? rt_eval_comp(s->eval, comp, pair, 2, &sum) : out_of_memory(s);
      rt_value_release(acc), rt_value_release(next);
      if (status != HLO_OK) return status;
      acc = sum;
    }
    if (!acc) return out_of_memory(s);
    if (acc->shape.dtype != dtype || acc->count != 1) {
      rt_value_release(acc);
      return fail(s, HLO_ERR_INPUT, "its reducer does not return one %s", hlo_dtype_name(dtype));
    }
    memcpy(out + e * (int64_t)size, acc->data, size);
    rt_value_release(acc);
  }
  return HLO_OK;
}

/* Every member's bytes (S blocks of bytes) in a new buffer, or NULL with the error set. */
static char *gather_all(spmd *s, const groups *g, const void *data, int64_t bytes) {
  char *all = malloc((size_t)(bytes * g->sizes[g->mine]) + 1);
  if (!all) return out_of_memory(s), NULL;
  rt_comm_groups cg = comm_groups(g);
  if (rt_comm_allgather(s->comm, &cg, data, bytes, all, s->what, s->eval->diag) != HLO_OK) {
    free(all);
    return NULL;
  }
  return all;
}

/* ---- the collectives, one operand each ---- */

/* The result is a new value (a kept buffer: every call makes one of the same size): MPI reads
 * the operand and writes the result (no copy of the operand first), except for the async
 * start, which reduces a copy in place. */
static hlo_status all_reduce(spmd *s, const groups *g, const rt_value *arg, rt_value **out) {
  rt_comm_reduce op;
  bool by_mpi = mpi_reducer(s->instr, &op) && rt_comm_reducible(arg->shape.dtype);
  bool start = by_mpi && s->instr->opcode == HLO_OP_ALL_REDUCE_START;
  rt_value *result = start ? rt_value_copy(arg) : rt_value_new_kept(&arg->shape);
  if (!result) return out_of_memory(s);
  rt_comm_groups cg = comm_groups(g);
  hlo_status status;
  if (start) {
    status = rt_comm_allreduce_start(s->comm, &cg, result, op, s->what, s->eval->diag);
  } else if (by_mpi) {
    status = rt_comm_allreduce(s->comm, &cg, arg->data, result->data, result->count, arg->shape.dtype, op, s->what,
                               s->eval->diag);
  } else {
    char *all = gather_all(s, g, arg->data, value_bytes(arg));
    status = all ? fold(s, all, g->sizes[g->mine], value_bytes(arg), 0, arg->count, arg->shape.dtype, result->data)
                 : s->eval->diag->status;
    free(all);
  }
  if (status != HLO_OK) return rt_value_release(result), status;
  *out = result;
  return HLO_OK;
}

static hlo_status all_gather(spmd *s, const groups *g, const rt_value *arg, const hlo_shape *shape, rt_value **out) {
  int S = g->sizes[g->mine], d = dim_attribute(s->instr);
  if (d < 0 || d >= arg->shape.rank || shape->rank != arg->shape.rank || shape->dims[d] != arg->shape.dims[d] * S)
    return fail(s, HLO_ERR_INPUT, "its result is not its operand gathered along its dimension%s", "");
  rt_value *result = rt_new_output(s->eval, s->instr, shape);
  if (!result) return s->eval->diag->status;
  char *all = gather_all(s, g, arg->data, value_bytes(arg));
  if (!all) return rt_value_release(result), s->eval->diag->status;
  int64_t outer, inner;
  around(&arg->shape, d, &outer, &inner);
  unpack(all, result->data, S, outer, arg->shape.dims[d] * inner);
  free(all);
  *out = result;
  return HLO_OK;
}

static hlo_status reduce_scatter(spmd *s, const groups *g, const rt_value *arg, const hlo_shape *shape, rt_value **out) {
  int S = g->sizes[g->mine], d = dim_attribute(s->instr);
  if (d < 0 || d >= arg->shape.rank || arg->shape.dims[d] % S || shape->rank != arg->shape.rank ||
      shape->dims[d] * S != arg->shape.dims[d])
    return fail(s, HLO_ERR_INPUT, "its result is not its operand split along its dimension%s", "");
  int64_t outer, inner, bytes = value_bytes(arg), count = arg->count / S;
  around(&arg->shape, d, &outer, &inner);
  char *blocks = malloc((size_t)bytes + 1);
  rt_value *result = blocks ? rt_new_output(s->eval, s->instr, shape) : NULL;
  if (!result) return free(blocks), blocks ? s->eval->diag->status : out_of_memory(s);
  pack(arg->data, blocks, S, outer, shape->dims[d] * inner);
  rt_comm_reduce op;
  rt_comm_groups cg = comm_groups(g);
  hlo_status status;
  if (mpi_reducer(s->instr, &op) && rt_comm_reducible(arg->shape.dtype)) {
    status = rt_comm_reduce_scatter(s->comm, &cg, blocks, result->data, count, arg->shape.dtype, op, s->what,
                                    s->eval->diag);
  } else {
    char *all = gather_all(s, g, blocks, bytes);
    status = all ? fold(s, all, S, bytes, bytes / S * g->index, count, arg->shape.dtype, result->data)
                 : s->eval->diag->status;
    free(all);
  }
  free(blocks);
  if (status != HLO_OK) return rt_value_release(result), status;
  *out = result;
  return HLO_OK;
}

/* The array form: split along the dimension, block j to member j, received blocks in member
 * order along the same dimension. */
static hlo_status all_to_all_array(spmd *s, const groups *g, const rt_value *arg, rt_value **out) {
  int S = g->sizes[g->mine], d = dim_attribute(s->instr);
  if (d < 0 || d >= arg->shape.rank || arg->shape.dims[d] % S)
    return fail(s, HLO_ERR_INPUT, "its split dimension does not split into its group's size%s", "");
  int64_t outer, inner, bytes = value_bytes(arg);
  around(&arg->shape, d, &outer, &inner);
  int64_t chunk = arg->shape.dims[d] / S * inner;
  char *send = malloc((size_t)bytes + 1), *recv = malloc((size_t)bytes + 1);
  rt_value *result = send && recv ? rt_new_output(s->eval, s->instr, &arg->shape) : NULL;
  hlo_status status = result ? HLO_OK : send && recv ? s->eval->diag->status : out_of_memory(s);
  if (status == HLO_OK) {
    pack(arg->data, send, S, outer, chunk);
    rt_comm_groups cg = comm_groups(g);
    status = rt_comm_alltoall(s->comm, &cg, send, bytes / S, recv, s->what, s->eval->diag);
    if (status == HLO_OK) unpack(recv, result->data, S, outer, chunk);
  }
  free(send), free(recv);
  if (status != HLO_OK) return rt_value_release(result), status;
  *out = result;
  return HLO_OK;
}

/* The tuple form: operand j to member j; result element j from member j. */
static hlo_status all_to_all_tuple(spmd *s, const groups *g, rt_value *const *args, rt_value **out) {
  int S = g->sizes[g->mine], n = s->instr->operand_count;
  if (n != S || !hlo_shape_is_tuple(&s->instr->shape) || s->instr->shape.tuple_count != n || n > 64)
    return fail(s, HLO_ERR_INPUT, "its operands are not one per member of its group%s", "");
  int64_t bytes = value_bytes(args[0]);
  for (int j = 1; j < n; j++)
    if (value_bytes(args[j]) != bytes) return fail(s, HLO_ERR_INPUT, "its operands differ in size%s", "");
  char *send = malloc((size_t)(bytes * n) + 1), *recv = malloc((size_t)(bytes * n) + 1);
  if (!send || !recv) return free(send), free(recv), out_of_memory(s);
  for (int j = 0; j < n; j++) memcpy(send + j * bytes, args[j]->data, (size_t)bytes);
  rt_comm_groups cg = comm_groups(g);
  hlo_status status = rt_comm_alltoall(s->comm, &cg, send, bytes, recv, s->what, s->eval->diag);
  rt_value *parts[64] = {0};
  for (int j = 0; status == HLO_OK && j < n; j++) {
    parts[j] = rt_new_output(s->eval, s->instr, &s->instr->shape.tuple[j]);
    if (!parts[j]) status = s->eval->diag->status;
    else memcpy(parts[j]->data, recv + j * bytes, (size_t)bytes);
  }
  free(send), free(recv);
  if (status == HLO_OK && !(*out = rt_value_new_tuple(n, parts))) status = out_of_memory(s);
  if (status != HLO_OK)
    for (int j = 0; j < n; j++) rt_value_release(parts[j]);
  return status;
}

static hlo_status broadcast(spmd *s, const groups *g, const rt_value *arg, rt_value **out) {
  rt_value *result = rt_value_copy(arg);
  if (!result) return out_of_memory(s);
  rt_comm_groups cg = comm_groups(g);
  hlo_status status = rt_comm_broadcast(s->comm, &cg, result->data, value_bytes(arg), 0, s->what, s->eval->diag);
  if (status != HLO_OK) return rt_value_release(result), status;
  *out = result;
  return HLO_OK;
}

/* source_target_pairs={{s,t},...} in replica ids (no channel_id) or partition ids: this
 * device sends to the target of the pair it is the source of and receives from the source of
 * the pair it is the target of; with no such pair its result is zeros. */
static hlo_status permute_peers(spmd *s, int *to_rank, int *from_rank) {
  bool partitions = hlo_instr_raw_attr(s->instr, "channel_id") != NULL;
  int me = partitions ? s->partition : s->replica, limit = partitions ? s->partitions : s->replicas;
  int to = -1, from = -1;
  const char *text = hlo_instr_raw_attr(s->instr, "source_target_pairs");
  long long pair[2];
  int n = 0;
  for (const char *p = text ? text : ""; *p;) {
    if (!isdigit((unsigned char)*p)) {
      if (*p++ == '{') n = 0;
      continue;
    }
    char *end;
    long long id = strtoll(p, &end, 10);
    p = end;
    if (n < 2) pair[n] = id;
    if (++n != 2) continue;
    if (pair[0] >= limit || pair[1] >= limit)
      return fail(s, HLO_ERR_INPUT, "source_target_pairs=%s: an id past the devices", text);
    int source = partitions ? s->replica * s->partitions + (int)pair[0] : (int)pair[0] * s->partitions + s->partition;
    int target = partitions ? s->replica * s->partitions + (int)pair[1] : (int)pair[1] * s->partitions + s->partition;
    if (pair[0] == me) to = target;
    if (pair[1] == me) from = source;
  }
  *to_rank = to, *from_rank = from;
  return HLO_OK;
}

static hlo_status permute(spmd *s, const rt_value *arg, const hlo_shape *shape, rt_value **out) {
  int to, from;
  if (permute_peers(s, &to, &from) != HLO_OK) return s->eval->diag->status;
  rt_value *result = rt_new_output(s->eval, s->instr, shape);
  if (!result) return s->eval->diag->status;
  if (value_bytes(result) != value_bytes(arg)) {
    rt_value_release(result);
    return fail(s, HLO_ERR_INPUT, "its result differs in size from its operand%s", "");
  }
  hlo_status status = rt_comm_exchange(s->comm, to, arg->data, from, result->data, value_bytes(arg), s->what,
                                       s->eval->diag);
  if (status != HLO_OK) return rt_value_release(result), status;
  *out = result;
  return HLO_OK;
}

/* ---- the kernel ---- */

/* "OPCODE %name shapes groups pairs dims": what every rank must agree on. */
static void signature(const spmd *s, rt_value *const *args, char *out, size_t size) {
  const hlo_instr *instr = s->instr;
  int n = snprintf(out, size, "%s %%%s", hlo_opcode_name(instr->opcode), instr->name);
  for (int i = 0; i < instr->operand_count && n > 0 && (size_t)n < size; i++) {
    char shape[96];
    n += snprintf(out + n, size - (size_t)n, " %s", hlo_shape_str(&args[i]->shape, shape, sizeof shape));
  }
  const char *attrs[] = {"replica_groups", "source_target_pairs", "channel_id"};
  for (int i = 0; i < 3 && n > 0 && (size_t)n < size; i++) {
    const char *text = hlo_instr_raw_attr(instr, attrs[i]);
    if (text) n += snprintf(out + n, size - (size_t)n, " %s=%s", attrs[i], text);
  }
}

/* The collective's result for the declared shape: each operand through one (the tuple of
 * them for several operands). */
static hlo_status per_operand(spmd *s, const groups *g, rt_value *const *args, int count, const hlo_shape *shape,
                              rt_value **out) {
  bool tuple = count > 1;
  if (tuple && (!hlo_shape_is_tuple(shape) || shape->tuple_count != count || count > 64))
    return fail(s, HLO_ERR_INPUT, "its result is not a tuple of one element per operand%s", "");
  rt_value *parts[64] = {0};
  hlo_status status = HLO_OK;
  for (int i = 0; status == HLO_OK && i < count; i++) {
    const hlo_shape *want = tuple ? &shape->tuple[i] : shape;
    switch (s->instr->opcode) {
      case HLO_OP_ALL_REDUCE: case HLO_OP_ALL_REDUCE_START: status = all_reduce(s, g, args[i], &parts[i]); break;
      case HLO_OP_ALL_GATHER: case HLO_OP_ALL_GATHER_START: status = all_gather(s, g, args[i], want, &parts[i]); break;
      case HLO_OP_REDUCE_SCATTER: status = reduce_scatter(s, g, args[i], want, &parts[i]); break;
      case HLO_OP_ALL_TO_ALL: status = all_to_all_array(s, g, args[i], &parts[i]); break;
      case HLO_OP_COLLECTIVE_BROADCAST: status = broadcast(s, g, args[i], &parts[i]); break;
      default: status = permute(s, args[i], want, &parts[i]); break;
    }
  }
  if (status == HLO_OK && !tuple) {
    *out = parts[0];
    return HLO_OK;
  }
  if (status == HLO_OK && !(*out = rt_value_new_tuple(count, parts))) status = out_of_memory(s);
  if (status != HLO_OK)
    for (int i = 0; i < count; i++) rt_value_release(parts[i]);
  return status;
}

/* Starts the transfer into result: the gather's blocks or the exchange. */
static hlo_status start_transfer(spmd *s, const groups *g, const rt_value *arg, rt_value *result) {
  if (s->instr->opcode == HLO_OP_ALL_GATHER_START) {
    int d = dim_attribute(s->instr), S = g->sizes[g->mine];
    if (d < 0 || d >= arg->shape.rank || result->shape.rank != arg->shape.rank ||
        result->shape.dims[d] != arg->shape.dims[d] * S)
      return fail(s, HLO_ERR_INPUT, "its result is not its operand gathered along its dimension%s", "");
    rt_comm_groups cg = comm_groups(g);
    return rt_comm_allgather_start(s->comm, &cg, arg->data, value_bytes(arg), result, s->what, s->eval->diag);
  }
  int to, from;
  if (permute_peers(s, &to, &from) != HLO_OK) return s->eval->diag->status;
  if (value_bytes(result) != value_bytes(arg))
    return fail(s, HLO_ERR_INPUT, "its result differs in size from its operand%s", "");
  return rt_comm_exchange_start(s->comm, to, arg->data, from, result, value_bytes(arg), s->what, s->eval->diag);
}

/* all-gather-start and collective-permute-start: (operand, result, context zeros...), the
 * result filled by the -done. */
static hlo_status async_start(spmd *s, const groups *g, rt_value *const *args, rt_value **out) {
  const hlo_shape *shape = &s->instr->shape;
  int count = s->instr->operand_count;
  if (!hlo_shape_is_tuple(shape) || shape->tuple_count < 2 || shape->tuple_count > 64 || count != 1 ||
      hlo_shape_is_tuple(&shape->tuple[1]))
    return fail(s, HLO_ERR_UNSUPPORTED, "an async start must have one operand and return (operand, result, ...)%s", "");
  rt_value *parts[64] = {0};
  parts[0] = rt_value_retain(args[0]);
  parts[1] = rt_new_output(s->eval, s->instr, &shape->tuple[1]);
  hlo_status status = parts[1] ? start_transfer(s, g, args[0], parts[1]) : s->eval->diag->status;
  for (int i = 2; status == HLO_OK && i < shape->tuple_count; i++)
    if (!(parts[i] = rt_new_output(s->eval, s->instr, &shape->tuple[i]))) status = s->eval->diag->status;
  if (status == HLO_OK && !(*out = rt_value_new_tuple(shape->tuple_count, parts))) status = out_of_memory(s);
  if (status != HLO_OK)
    for (int i = 0; i < shape->tuple_count; i++) rt_value_release(parts[i]);
  return status;
}

/* all-gather-done: the start's blocks, member j's operand, laid out along the dimension. */
static void lay_out_gather(const hlo_instr *start, const rt_value *operand, rt_value *result, const char *blocks) {
  int d = dim_attribute(start);
  int64_t outer, inner;
  around(&operand->shape, d, &outer, &inner);
  unpack(blocks, result->data, (int)(result->shape.dims[d] / operand->shape.dims[d]), outer,
         operand->shape.dims[d] * inner);
}

/* The -done of an async pair: waits for the start's transfers and passes its result on (the
 * all-reduce-start's value, a tuple of them for several operands, or element 1 of the
 * all-gather-start's or collective-permute-start's tuple). */
static hlo_status async_done(spmd *s, rt_value *started, rt_value **out) {
  bool reduce = s->instr->opcode == HLO_OP_ALL_REDUCE_DONE;
  if (!reduce && (started->shape.dtype != HLO_TUPLE || started->tuple_count < 2))
    return fail(s, HLO_ERR_INPUT, "its operand must be the tuple of an async start%s", "");
  rt_value *result = reduce ? started : started->tuple[1];
  int count = reduce && started->shape.dtype == HLO_TUPLE ? started->tuple_count : 1;
  for (int i = 0; i < count; i++) {
    rt_value *target = count > 1 || result->shape.dtype == HLO_TUPLE ? result->tuple[i] : result;
    void *blocks = NULL;
    if (rt_comm_finish(s->comm, target, &blocks, s->what, s->eval->diag) != HLO_OK) return s->eval->diag->status;
    if (blocks) lay_out_gather(s->instr->operands[0], started->tuple[0], target, blocks);
    free(blocks);
  }
  *out = rt_value_retain(result);
  return HLO_OK;
}

static hlo_status device_id(spmd *s, int id, rt_value **out) {
  *out = rt_new_output(s->eval, s->instr, &s->instr->shape);
  if (!*out) return s->eval->diag->status;
  rt_set_u64(*out, 0, (uint64_t)id);
  return HLO_OK;
}

static hlo_status open_device(spmd *s, rt_eval *eval, const hlo_instr *instr) {
  const hlo_module *module = instr->parent ? instr->parent->module : NULL;
  *s = (spmd){.eval = eval, .instr = instr, .comm = eval->options->comm};
  s->replicas = module_count(module, "replica_count");
  s->partitions = module_count(module, "num_partitions");
  s->rank = rt_comm_rank(s->comm);
  snprintf(s->what, sizeof s->what, "%s %%%s", hlo_opcode_name(instr->opcode), instr->name);
  int devices = s->replicas * s->partitions;
  if (devices != rt_comm_size(s->comm)) {
    char why[160];
    snprintf(why, sizeof why, "the module has %d replicas x %d partitions = %d devices, the world %d ranks",
             s->replicas, s->partitions, devices, rt_comm_size(s->comm));
    return fail(s, HLO_ERR_INPUT, "%s: run it with one rank per device", why);
  }
  s->replica = s->rank / s->partitions;
  s->partition = s->rank % s->partitions;
  return HLO_OK;
}

RT_KERNEL(rt_kernel_collective_spmd) {
  spmd s;
  if (open_device(&s, eval, instr) != HLO_OK) return eval->diag->status;
  switch (instr->opcode) {
    case HLO_OP_REPLICA_ID: return device_id(&s, s.replica, out);
    case HLO_OP_PARTITION_ID: return device_id(&s, s.partition, out);
    case HLO_OP_ALL_REDUCE_DONE: case HLO_OP_ALL_GATHER_DONE: case HLO_OP_COLLECTIVE_PERMUTE_DONE:
      return async_done(&s, args[0], out);
    default: break;
  }
  char sig[256];
  signature(&s, args, sig, sizeof sig);
  if (rt_comm_agree(s.comm, s.what, sig, eval->diag) != HLO_OK) return eval->diag->status;
  groups g = {0};
  bool pairs = instr->opcode == HLO_OP_COLLECTIVE_PERMUTE || instr->opcode == HLO_OP_COLLECTIVE_PERMUTE_START;
  if (!pairs && device_groups(&s, &g) != HLO_OK) return eval->diag->status;
  hlo_status status;
  switch (instr->opcode) {
    case HLO_OP_ALL_GATHER_START: case HLO_OP_COLLECTIVE_PERMUTE_START:
      status = async_start(&s, &g, args, out);
      break;
    case HLO_OP_ALL_TO_ALL:
      status = instr->dimensions.count == 0 ? all_to_all_tuple(&s, &g, args, out)
                                            : per_operand(&s, &g, args, instr->operand_count, &instr->shape, out);
      break;
    case HLO_OP_ALL_REDUCE: case HLO_OP_ALL_REDUCE_START: case HLO_OP_ALL_GATHER: case HLO_OP_REDUCE_SCATTER:
    case HLO_OP_COLLECTIVE_BROADCAST: case HLO_OP_COLLECTIVE_PERMUTE:
      status = per_operand(&s, &g, args, instr->operand_count, &instr->shape, out);
      break;
    default:
      status = fail(&s, HLO_ERR_UNSUPPORTED, "not a collective latch runs across ranks%s", "");
  }
  groups_free(&g);
  return status;
}
