/* The HLO text parser: every corpus file parses, typed attributes decode to the values in the
 * text, raw attributes keep their text, constants hold their values, and malformed input gives
 * one clear error at the right line and column. Counts were taken independently with grep. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hlo/hlo.h"
#include "test.h"

static const char *corpus_dir(void) {
  const char *dir = getenv("LATCH_CORPUS");
  return dir && *dir ? dir : "../shared/corpus/xla";
}

static char *corpus_path(const char *name) {
  static char path[4096];
  snprintf(path, sizeof path, "%s/%s", corpus_dir(), name);
  return path;
}

/* Parses one file that must hold exactly one module. */
static hlo_module *parse_corpus(const char *name) {
  hlo_module **modules = NULL;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  int count = hlo_parse_file(corpus_path(name), &modules, &diag);
  CHECK_MSG(count == 1, "%s: %s", name, diag.message);
  if (count != 1) {
    for (int i = 0; i < count; i++) hlo_module_free(modules[i]);
    free(modules);
    return NULL;
  }
  hlo_module *module = modules[0];
  free(modules);
  return module;
}

static hlo_module *parse_text(const char *text) {
  hlo_diag diag;
  hlo_diag_clear(&diag);
  hlo_module *module = hlo_parse_module(text, strlen(text), "t.hlo", &diag);
  CHECK_MSG(module != NULL, "%s", diag.message);
  return module;
}

static hlo_instr *find_instr(const hlo_module *module, const char *comp_name, const char *name) {
  for (int c = 0; c < module->comp_count; c++) {
    const hlo_comp *comp = module->comps[c];
    if (comp_name && strcmp(comp->name, comp_name) != 0) continue;
    for (int i = 0; i < comp->instr_count; i++)
      if (strcmp(comp->instrs[i]->name, name) == 0) return comp->instrs[i];
  }
  return NULL;
}

static bool ints_are(hlo_ints ints, int count, const int64_t *values) {
  if (ints.count != count) return false;
  for (int i = 0; i < count; i++)
    if (ints.values[i] != values[i]) return false;
  return true;
}
#define INTS_ARE(ints, ...)                                                     \
  ints_are((ints), (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t)), \
           (int64_t[]){__VA_ARGS__})

/* Invariants any parsed module must meet: resolved operands and callees, operands before
 * users, a root in every computation, parameters 0..n-1, callees before callers. */
static void check_well_formed(const hlo_module *module, const char *what) {
  CHECK_MSG(module->entry && module->entry->is_entry, "%s: entry", what);
  int entries = 0;
  for (int c = 0; c < module->comp_count; c++) {
    const hlo_comp *comp = module->comps[c];
    entries += comp->is_entry;
    CHECK_MSG(comp->id == c && comp->root && comp->root->parent == comp, "%s: %s root", what, comp->name);
    for (int i = 0; i < comp->instr_count; i++) {
      const hlo_instr *instr = comp->instrs[i];
      if (instr->id != i) CHECK_MSG(false, "%s: %s id", what, instr->name);
      for (int o = 0; o < instr->operand_count; o++) {
        const hlo_instr *operand = instr->operands[o];
        if (!operand || operand->parent != comp || operand->id >= i)
          CHECK_MSG(false, "%s: %s operand %d out of order", what, instr->name, o);
      }
      for (int k = 0; k < instr->called_count; k++) {
        const hlo_comp *callee = instr->called[k];
        if (!callee || callee->id >= c) CHECK_MSG(false, "%s: %s callee %d after caller", what, instr->name, k);
      }
    }
    for (int n = 0; n < comp->param_count; n++) {
      const hlo_instr *param = comp->params[n];
      if (!param || param->opcode != HLO_OP_PARAMETER || param->parameter_number != n)
        CHECK_MSG(false, "%s: %s parameter %d", what, comp->name, n);
    }
  }
  CHECK_MSG(entries == 1, "%s: %d entries", what, entries);
}

static void count_module(const hlo_module *module, int *comps, int *instrs) {
  *comps = module->comp_count;
  *instrs = 0;
  for (int c = 0; c < module->comp_count; c++) *instrs += module->comps[c]->instr_count;
}

/* ---- the corpus ---- */

static void every_corpus_file_parses(void) {
  DIR *dir = opendir(corpus_dir());
  CHECK_MSG(dir != NULL, "cannot open corpus %s (set LATCH_CORPUS)", corpus_dir());
  if (!dir) return;
  int files = 0;
  struct dirent *entry;
  while ((entry = readdir(dir))) {
    size_t len = strlen(entry->d_name);
    if (len < 4 || strcmp(entry->d_name + len - 4, ".hlo") != 0) continue;
    hlo_module **modules = NULL;
    hlo_diag diag;
    hlo_diag_clear(&diag);
    int count = hlo_parse_file(corpus_path(entry->d_name), &modules, &diag);
    CHECK_MSG(count >= 1, "%s", diag.message);
    for (int i = 0; i < count; i++) {
      check_well_formed(modules[i], entry->d_name);
      hlo_module_free(modules[i]);
    }
    free(modules);
    files++;
  }
  closedir(dir);
  CHECK(files >= 16);
}

static void corpus_counts_match_grep(void) {
  static const struct { const char *file; int comps, instrs; const char *entry, *name; } expected[] = {
      {"mobilenet_v2.hlo", 55, 3924, "IrToHlo.3979", "IrToHlo.3979"},
      {"hlo_llama31_70b_bf16_16x8.hlo", 139, 1875, "main.1915_spmd", "jit_train_step"},
      {"nv_maxtext_1n1g_jit_train_step_before_optimization.hlo", 87, 1947, "main.2034", "jit_train_step"},
      {"import.hlo", 178, 564, "dummy_main", "foobar"},
      {"sharded_computation.hlo", 7, 100, "main.107", "pjit_ref_func"},
      {"multiple_gemm_fusions.hlo", 5, 26, "e", "e"},
      {"while_with_known_trip_count.hlo", 3, 12, "main", "main"},
  };
  for (size_t i = 0; i < sizeof expected / sizeof expected[0]; i++) {
    hlo_module *module = parse_corpus(expected[i].file);
    if (!module) continue;
    int comps, instrs;
    count_module(module, &comps, &instrs);
    CHECK_EQ_INT(comps, expected[i].comps);
    CHECK_EQ_INT(instrs, expected[i].instrs);
    CHECK_STR(module->entry->name, expected[i].entry);
    CHECK_STR(module->name, expected[i].name);
    CHECK(module->comps[module->comp_count - 1] == module->entry || module->entry->id < module->comp_count);
    hlo_module_free(module);
  }
}

static void isolated_convolution_decodes(void) {
  hlo_module *module = parse_corpus("isolated_convolution.hlo");
  if (!module) return;
  CHECK_STR(module->name, "convolution.167");
  hlo_instr *conv = module->entry->root;
  CHECK(conv->opcode == HLO_OP_CONVOLUTION);
  CHECK_EQ_INT(conv->operand_count, 2);
  CHECK_STR(conv->operands[0]->name, "parameter.0");
  CHECK(conv->window && conv->window->rank == 2);
  if (conv->window) {
    for (int i = 0; i < 2; i++) {
      hlo_window_dim d = conv->window->dims[i];
      CHECK(d.size == 3 && d.stride == 1 && d.pad_low == 1 && d.pad_high == 1);
      CHECK(d.lhs_dilate == 1 && d.rhs_dilate == 1 && !d.reversal);
    }
  }
  /* b01f_01oi->b01f */
  hlo_conv_dims *dims = conv->conv;
  CHECK(dims != NULL);
  if (dims) {
    CHECK_EQ_INT(dims->spatial_count, 2);
    CHECK(dims->input_batch == 0 && dims->input_feature == 3);
    CHECK(dims->input_spatial[0] == 1 && dims->input_spatial[1] == 2);
    CHECK(dims->kernel_spatial[0] == 0 && dims->kernel_spatial[1] == 1);
    CHECK(dims->kernel_output_feature == 2 && dims->kernel_input_feature == 3);
    CHECK(dims->output_batch == 0 && dims->output_feature == 3);
    CHECK(dims->output_spatial[0] == 1 && dims->output_spatial[1] == 2);
  }
  CHECK_EQ_INT(conv->feature_group_count, 1);
  /* {3,0,2,1}: a written, non-default layout */
  hlo_instr *p0 = module->entry->params[0];
  CHECK(p0->shape.has_layout);
  CHECK(p0->shape.minor_to_major[0] == 3 && p0->shape.minor_to_major[1] == 0 &&
        p0->shape.minor_to_major[2] == 2 && p0->shape.minor_to_major[3] == 1);
  CHECK(p0->shape.dims[3] == 128 && p0->shape.dtype == HLO_F32);
  hlo_module_free(module);
}

static void while_loop_calls_its_computations(void) {
  hlo_module *module = parse_corpus("while_with_known_trip_count.hlo");
  if (!module) return;
  /* No ENTRY and no ROOT: the last computation is the entry, last instructions are roots. */
  CHECK_STR(module->entry->name, "main");
  CHECK(module->comps[2] == module->entry);
  hlo_instr *loop = module->entry->root;
  CHECK_STR(loop->name, "w");
  CHECK(loop->opcode == HLO_OP_WHILE);
  CHECK_EQ_INT(loop->called_count, 2);
  if (loop->called_count == 2) {
    CHECK_STR(loop->called[0]->name, "condition");
    CHECK_STR(loop->called[1]->name, "body");
  }
  CHECK_STR(hlo_instr_raw_attr(loop, "backend_config"), "{\"known_trip_count\":{\"n\":\"7\"}}");
  hlo_instr *compare = find_instr(module, "condition", "done");
  CHECK(compare && compare->direction == HLO_DIR_LT && compare->parent->root == compare);
  hlo_instr *c7 = find_instr(module, "condition", "trip_count");
  CHECK(c7 && c7->literal && c7->literal->data && *(int32_t *)c7->literal->data == 7);
  hlo_module_free(module);
}

static void import_attributes_decode(void) {
  hlo_module *module = parse_corpus("import.hlo");
  if (!module) return;
  hlo_instr *gather = find_instr(module, "test_gather", "gather");
  CHECK(gather && gather->gather);
  if (gather && gather->gather) {
    CHECK(INTS_ARE(gather->gather->offset_dims, 1));
    CHECK(INTS_ARE(gather->gather->collapsed_slice_dims, 0, 1));
    CHECK(INTS_ARE(gather->gather->start_index_map, 0, 1));
    CHECK_EQ_INT(gather->gather->index_vector_dim, 1);
    CHECK(gather->gather->indices_are_sorted);
    CHECK(INTS_ARE(gather->gather_slice_sizes, 1, 1, 300));
  }
  gather = find_instr(module, "test_gather_batching_dims", "gather");
  CHECK(gather && gather->gather);
  if (gather && gather->gather) {
    CHECK(INTS_ARE(gather->gather->operand_batching_dims, 0, 1));
    CHECK(INTS_ARE(gather->gather->start_indices_batching_dims, 1, 0));
    CHECK(gather->gather->collapsed_slice_dims.count == 0);
    CHECK_EQ_INT(gather->gather->index_vector_dim, 2);
  }
  hlo_instr *scatter = find_instr(module, "test_scatter_batching_dims", "scatter");
  CHECK(scatter && scatter->scatter && scatter->called_count == 1);
  if (scatter && scatter->scatter) {
    CHECK(INTS_ARE(scatter->scatter->update_window_dims, 2));
    CHECK(INTS_ARE(scatter->scatter->input_batching_dims, 0, 1));
    CHECK(INTS_ARE(scatter->scatter->scatter_indices_batching_dims, 1, 0));
    CHECK(INTS_ARE(scatter->scatter->scatter_dims_to_operand_dims, 2));
    CHECK_EQ_INT(scatter->scatter->index_vector_dim, 2);
    CHECK_STR(scatter->called[0]->name, "update_computation");
  }
  hlo_instr *pad = find_instr(module, "test_pad_interior", "pad.3");
  CHECK(pad && pad->padding && pad->padding->rank == 1);
  if (pad && pad->padding) CHECK(pad->padding->low[0] == 0 && pad->padding->high[0] == 0 && pad->padding->interior[0] == 2);
  pad = find_instr(module, "test_pad_edge", "pad.3");
  CHECK(pad && pad->padding && pad->padding->rank == 3);
  if (pad && pad->padding) CHECK(pad->padding->low[2] == 5 && pad->padding->high[2] == 6 && pad->padding->interior[2] == 0);

  hlo_instr *conv = find_instr(module, "test_conv", "convolution.4");
  CHECK(conv && conv->window && conv->window->rank == 2);
  if (conv && conv->window) {
    CHECK(conv->window->dims[0].stride == 4 && conv->window->dims[1].stride == 5);
    CHECK(conv->window->dims[0].pad_low == 44 && conv->window->dims[0].pad_high == 45);
    CHECK(conv->window->dims[1].rhs_dilate == 3 && conv->window->dims[1].lhs_dilate == 1);
  }
  CHECK(conv && conv->conv && conv->conv->output_feature == 0 && conv->conv->output_batch == 3);
  conv = find_instr(module, "test_convolve1D_reversal", "convolution");
  CHECK(conv && conv->window && conv->window->rank == 1 && conv->window->dims[0].reversal);
  if (conv && conv->window) CHECK(conv->window->dims[0].pad_low == 1 && conv->window->dims[0].pad_high == 2);

  hlo_instr *rw = find_instr(module, NULL, "reduce-window.1");
  CHECK(rw && rw->window && rw->window->rank == 4 && rw->called_count == 1);
  if (rw && rw->window) CHECK(rw->window->dims[2].pad_low == 0 && rw->window->dims[2].pad_high == 2 && rw->window->dims[1].rhs_dilate == 2);

  hlo_instr *sas = find_instr(module, "test_select_and_scatter", "select-and-scatter");
  CHECK(sas && sas->called_count == 2);
  if (sas && sas->called_count == 2) {
    CHECK_STR(sas->called[0]->name, "ge_select");
    CHECK_STR(sas->called[1]->name, "add_gather");
  }
  /* the text writes body= before condition=; called keeps the roles' order */
  hlo_instr *loop = find_instr(module, "test_while", "while.2");
  CHECK(loop && loop->called_count == 2);
  if (loop && loop->called_count == 2) {
    CHECK_STR(loop->called[0]->name, "cond");
    CHECK_STR(loop->called[1]->name, "loop");
  }
  hlo_instr *cc = find_instr(module, "test_custom_call_with_computations", "custom-call");
  CHECK(cc && cc->called_count == 2);
  if (cc) {
    CHECK_STR(cc->custom_call_target, "foo");
    CHECK(hlo_instr_raw_attr(cc, "called_computations") == NULL);
  }
  hlo_instr *lit = find_instr(module, "test_set_bound", "custom-call");
  CHECK(lit && lit->raw_attr_count == 1);
  if (lit) CHECK_STR(hlo_instr_raw_attr(lit, "literal"), "s32[] 1");
  hlo_instr *alias = find_instr(module, "test_custom_call_with_output_operand_alising", "custom-call");
  if (alias) CHECK_STR(hlo_instr_raw_attr(alias, "output_to_operand_aliasing"), "{{0}: (0, {1})}");

  hlo_instr *cmp = find_instr(module, "test_compare", "compare.5");
  CHECK(cmp && cmp->direction == HLO_DIR_LE && cmp->compare_type == HLO_CMP_TOTALORDER);
  hlo_instr *bn = find_instr(module, "test_batch_norm_grad", "batch-norm-grad");
  CHECK(bn && bn->index == 1);
  if (bn) CHECK_NEAR(bn->epsilon, 0.001, 0);
  hlo_instr *rng = find_instr(module, "rngbitgen_tuple_shape", "rng-bit-generator.2");
  CHECK(rng && rng->rng_algorithm == HLO_RNG_PHILOX);
  if (rng) CHECK_STR(hlo_instr_raw_attr(rng, "sharding"), "{{maximal device=0}, {maximal device=1}}");
  hlo_instr *normal = find_instr(module, "test_rng_normal", "rng.4");
  CHECK(normal && normal->rng_distribution == HLO_RNG_NORMAL);
  hlo_instr *iota = find_instr(module, "test_iota_2", "iota.0");
  CHECK(iota && iota->index == 1);
  hlo_instr *rp = find_instr(module, "reduce_precision", "reduce_precision");
  CHECK(rp && rp->exponent_bits == 8 && rp->mantissa_bits == 10);
  hlo_instr *sort = find_instr(module, "test_sort", "sorted");
  CHECK(sort && sort->is_stable && INTS_ARE(sort->dimensions, 0) && sort->called_count == 1);
  hlo_instr *gds = find_instr(module, "test_get_dimension_size", "get-dimension-size.2");
  CHECK(gds && gds->index == 1);
  hlo_instr *dus = find_instr(module, "test_dynamic_slice", "dynamic-slice");
  CHECK(dus && INTS_ARE(dus->dimensions, 1, 1, 32));
  hlo_instr *dot = find_instr(module, "test_dot", "dot.3");
  CHECK(dot && dot->dot && INTS_ARE(dot->dot->lhs_contracting, 1) && INTS_ARE(dot->dot->rhs_contracting, 0));
  if (dot) CHECK_STR(hlo_instr_raw_attr(dot, "operand_precision"), "{high,highest}");
  hlo_instr *async = find_instr(module, "async", "async-update");
  CHECK(async && async->called_count == 1 && async->operand_count == 1);
  hlo_instr *sharded = find_instr(module, "test_tuple_args_and_result_with_sharding", "arg2");
  if (sharded) CHECK_STR(hlo_instr_raw_attr(sharded, "sharding"), "{devices=[2,2]<=[2,2]T(1,0) last_tile_dim_replicate}");
  /* ROOT written before another instruction */
  hlo_instr *take_left = find_instr(module, "map_computation_take_left", "Arg_0.4");
  CHECK(take_left && take_left->parent->root == take_left && take_left->parent->param_count == 2);
  /* dynamic dims */
  hlo_instr *unbounded = find_instr(module, "unbounded", "Arg_0.1");
  CHECK(unbounded && unbounded->shape.dim_kind[0] == HLO_DIM_UNBOUNDED && unbounded->shape.dims[0] == -1);
  hlo_instr *bounded = find_instr(module, "test_set_dimension_size", "set-dimension-size.2");
  CHECK(bounded && bounded->shape.dim_kind[1] == HLO_DIM_BOUNDED && bounded->shape.dims[1] == 4);
  /* nested tuple shapes and the empty tuple */
  hlo_instr *infeed = find_instr(module, "test_infeed_with_empty_tuple_data", "infeed.2");
  CHECK(infeed && infeed->shape.dtype == HLO_TUPLE && infeed->shape.tuple_count == 2);
  if (infeed) CHECK(infeed->shape.tuple[0].dtype == HLO_TUPLE && infeed->shape.tuple[0].tuple_count == 0 && infeed->shape.tuple[1].dtype == HLO_TOKEN);
  hlo_module_free(module);
}

static void import_constants_decode(void) {
  hlo_module *module = parse_corpus("import.hlo");
  if (!module) return;
  hlo_instr *c1 = find_instr(module, "test_constant", "constant.1");
  CHECK(c1 && c1->literal && c1->literal->data);
  if (c1 && c1->literal && c1->literal->data) {
    const float *v = c1->literal->data;
    CHECK(v[0] == 1 && v[1] == 2 && v[2] == 3 && v[3] == 4);
  }
  hlo_instr *c2 = find_instr(module, "test_constant", "constant.2");
  if (c2 && c2->literal && c2->literal->data) {
    const uint64_t *v = c2->literal->data;
    CHECK(v[0] == 1 && v[3] == 8);
  }
  hlo_instr *c3 = find_instr(module, "test_constant", "constant.3");
  if (c3 && c3->literal && c3->literal->data) CHECK_EQ_INT(((uint16_t *)c3->literal->data)[3], 0x4080);
  hlo_instr *c4 = find_instr(module, "test_constant", "constant.4");
  CHECK(c4 && c4->literal && !c4->literal->data);
  if (c4 && c4->literal) CHECK_STR(c4->literal->raw_text, "(1, 0)");
  hlo_instr *c6 = find_instr(module, "test_constant", "constant.6");
  CHECK(c6 && c6->parent->root == c6);
  if (c6 && c6->literal && c6->literal->data) {
    const uint16_t *v = c6->literal->data;
    CHECK(v[0] == 0x3c00 && v[1] == 0xc400 && v[2] == 0xfbff && v[3] == 0x2400);
  }
  hlo_instr *c7 = find_instr(module, "test_constant", "constant.7");
  if (c7 && c7->literal) CHECK_STR(c7->literal->raw_text, "{1, 2, 3, 4}");
  hlo_instr *ninf = find_instr(module, "test_reduce_window_multiple_outputs", "constant.4");
  if (ninf && ninf->literal && ninf->literal->data) CHECK(isinf(*(float *)ninf->literal->data) && *(float *)ninf->literal->data < 0);
  hlo_instr *pred = find_instr(module, "test_reduce_window_multiple_outputs", "constant.3");
  if (pred && pred->literal && pred->literal->data) CHECK_EQ_INT(*(uint8_t *)pred->literal->data, 0);
  hlo_module_free(module);
}

static void llama_collectives_and_slices(void) {
  hlo_module *module = parse_corpus("hlo_llama31_70b_bf16_16x8.hlo");
  if (!module) return;
  hlo_instr *slice = find_instr(module, NULL, "slice.17");
  CHECK(slice && slice->slice_starts.count == 4);
  if (slice && slice->slice_starts.count == 4) {
    CHECK(slice->slice_starts.values[3] == 1 && slice->slice_limits.values[3] == 128);
    CHECK(slice->slice_strides.values[3] == 1 && slice->slice_limits.values[1] == 8192);
  }
  /* the bare replica_groups form is kept as written */
  int bare = 0;
  for (int c = 0; c < module->comp_count; c++)
    for (int i = 0; i < module->comps[c]->instr_count; i++) {
      const char *groups = hlo_instr_raw_attr(module->comps[c]->instrs[i], "replica_groups");
      if (groups && strcmp(groups, "[2,64]<=[128]") == 0) bare++;
    }
  CHECK_EQ_INT(bare, 61);
  /* header attributes other than entry_computation_layout are kept */
  CHECK_EQ_INT(module->raw_attr_count, 1);
  if (module->raw_attr_count) CHECK_STR(module->raw_attrs[0].name, "input_output_alias");
  hlo_module_free(module);
}

/* ---- forms written here ---- */

static void optional_parts_and_forward_references(void) {
  hlo_module *module = parse_text(
      "HloModule m:\n"
      "add {\n"
      "  lhs = f32[] parameter(0)\n"
      "  rhs = f32[] parameter(1)\n"
      "  ROOT add = f32[] add(lhs, rhs)\n"
      "} // add\n"
      "%e (a: f32[2,3], b: f32[]) -> f32[2] {\n"
      "  ROOT %r = f32[2] reduce(%x, b), dimensions={1}, to_apply=add /* trailing */\n"
      "  x = f32[2,3]{1,0} add(a, /*index=1*/a)\n"
      "  b = f32[] parameter(1)\n"
      "  a = f32[2,3]{1,0} parameter(0)\n"
      "}\n");
  if (!module) return;
  CHECK_STR(module->name, "m");
  CHECK_STR(module->entry->name, "e");
  hlo_comp *e = module->entry;
  CHECK_STR(e->root->name, "r");
  CHECK(e->instrs[e->instr_count - 1] == e->root);
  CHECK(e->param_count == 2 && strcmp(e->params[0]->name, "a") == 0 && strcmp(e->params[1]->name, "b") == 0);
  CHECK(e->root->called_count == 1 && e->root->called[0] == module->comps[0]);
  CHECK(INTS_ARE(e->root->dimensions, 1));
  check_well_formed(module, "forward references");
  hlo_module_free(module);
}

static void layouts_and_dynamic_dims(void) {
  hlo_module *module = parse_text(
      "HloModule m, is_scheduled=true, entry_computation_layout={(bf16[8,128]{1,0:T(8,128)})->bf16[8,128]}\n"
      "ENTRY e {\n"
      "  p = bf16[8,128]{1,0:T(8,128)(2,1)} parameter(0)\n"
      "  q = f32[128]{:T(128)} parameter(1)\n"
      "  d = s32[?,3] parameter(2)\n"
      "  b = f32[<=4]{0} parameter(3)\n"
      "  ROOT t = (bf16[8,128]{0,1}, f32[128], s32[?,3], f32[<=4]) tuple(p, q, d, b)\n"
      "}\n");
  if (!module) return;
  CHECK_EQ_INT(module->raw_attr_count, 1);
  if (module->raw_attr_count) {
    CHECK_STR(module->raw_attrs[0].name, "is_scheduled");
    CHECK_STR(module->raw_attrs[0].value, "true");
  }
  hlo_instr *p = find_instr(module, NULL, "p");
  CHECK(p && p->shape.has_layout && p->shape.minor_to_major[0] == 1);
  if (p) CHECK_STR(p->shape.layout_extra, "T(8,128)(2,1)");
  hlo_instr *q = find_instr(module, NULL, "q");
  CHECK(q && !q->shape.has_layout && q->shape.minor_to_major[0] == 0);
  if (q) CHECK_STR(q->shape.layout_extra, "T(128)");
  hlo_instr *d = find_instr(module, NULL, "d");
  CHECK(d && !d->shape.has_layout && d->shape.dim_kind[0] == HLO_DIM_UNBOUNDED && d->shape.dims[1] == 3);
  CHECK(d && d->shape.minor_to_major[0] == 1 && d->shape.minor_to_major[1] == 0);
  hlo_instr *t = find_instr(module, NULL, "t");
  CHECK(t && t->shape.tuple_count == 4 && t->shape.tuple[0].has_layout && t->shape.tuple[0].minor_to_major[0] == 0);
  CHECK(t && t->shape.tuple[3].dim_kind[0] == HLO_DIM_BOUNDED && t->shape.tuple[3].dims[0] == 4);
  hlo_module_free(module);
}

static void attributes_typed_and_raw(void) {
  hlo_module *module = parse_text(
      "HloModule m\n"
      "ENTRY e {\n"
      "  p = f32[8,16] parameter(0), sharding={devices=[2,2]<=[4] last_tile_dim_replicate}, metadata={op_name=\"a, b\" source_line=3}\n"
      "  s = f32[4,5] slice(p), slice={[0:8:2], [1:16:3]}\n"
      "  ar = f32[4,5] all-reduce(s), replica_groups=[2,64]<=[128], channel_id=7, to_apply={\n"
      "    x = f32[] parameter(0)\n"
      "    y = f32[] parameter(1)\n"
      "    ROOT z = f32[] add(x, y)\n"
      "  }, use_global_device_ids=true\n"
      "  c = f32[4,5] call(ar), to_apply=e.callee, is_composite=true,\n"
      "    frontend_attributes={composite.attributes={n = 1 : i32},composite.name=\"my.op\",composite.version=\"1\"}\n"
      "  f = f32[4,5] fusion(c), kind=kLoop, calls=e.callee, control-predecessors={s}, custom_thing=[1,2]{3}(4)\n"
      "  ROOT k = f32[4,5] custom-call(f), custom_call_target=\"foo\\\"bar\", api_version=API_VERSION_TYPED_FFI, backend_config={\"a\": \"}\"}\n"
      "}\n"
      "e.callee {\n"
      "  ROOT v = f32[4,5] parameter(0)\n"
      "}\n");
  if (!module) return;
  CHECK_STR(module->entry->name, "e");
  CHECK(module->comps[module->comp_count - 1] == module->entry);
  hlo_instr *p = find_instr(module, "e", "p");
  CHECK(p && p->raw_attr_count == 2);
  if (p) {
    CHECK_STR(hlo_instr_raw_attr(p, "sharding"), "{devices=[2,2]<=[4] last_tile_dim_replicate}");
    CHECK_STR(hlo_instr_raw_attr(p, "metadata"), "{op_name=\"a, b\" source_line=3}");
  }
  hlo_instr *s = find_instr(module, "e", "s");
  CHECK(s && INTS_ARE(s->slice_starts, 0, 1) && INTS_ARE(s->slice_limits, 8, 16) && INTS_ARE(s->slice_strides, 2, 3));
  hlo_instr *ar = find_instr(module, "e", "ar");
  CHECK(ar && ar->called_count == 1);
  if (ar && ar->called_count == 1) {
    CHECK(ar->called[0]->instr_count == 3 && ar->called[0]->param_count == 2);
    CHECK_STR(ar->called[0]->root->name, "z");
    CHECK_STR(hlo_instr_raw_attr(ar, "replica_groups"), "[2,64]<=[128]");
    CHECK_STR(hlo_instr_raw_attr(ar, "channel_id"), "7");
    CHECK_STR(hlo_instr_raw_attr(ar, "use_global_device_ids"), "true");
  }
  hlo_instr *c = find_instr(module, "e", "c");
  CHECK(c && c->is_composite);
  if (c) {
    CHECK_STR(c->composite_name, "my.op");
    CHECK(hlo_instr_raw_attr(c, "frontend_attributes") != NULL);
  }
  hlo_instr *f = find_instr(module, "e", "f");
  if (f) {
    CHECK_STR(f->fusion_kind, "kLoop");
    CHECK_STR(hlo_instr_raw_attr(f, "control-predecessors"), "{s}");
    CHECK_STR(hlo_instr_raw_attr(f, "custom_thing"), "[1,2]{3}(4)");
  }
  hlo_instr *k = find_instr(module, "e", "k");
  if (k) {
    CHECK_STR(k->custom_call_target, "foo\"bar");
    CHECK_STR(hlo_instr_raw_attr(k, "backend_config"), "{\"a\": \"}\"}");
    CHECK_STR(hlo_instr_raw_attr(k, "api_version"), "API_VERSION_TYPED_FFI");
  }
  check_well_formed(module, "attributes");
  hlo_module_free(module);
}

static void conditional_branches(void) {
  hlo_module *module = parse_text(
      "HloModule m\n"
      "b0 { ROOT a = f32[] parameter(0) }\n"
      "b1 { a = f32[] parameter(0)\n ROOT n = f32[] negate(a) }\n"
      "ENTRY e {\n"
      "  i = s32[] parameter(0)\n"
      "  x = f32[] parameter(1)\n"
      "  ROOT c = f32[] conditional(i, x, x), branch_computations={b0, %b1}\n"
      "}\n");
  if (!module) return;
  hlo_instr *c = module->entry->root;
  CHECK(c->called_count == 2);
  if (c->called_count == 2) {
    CHECK_STR(c->called[0]->name, "b0");
    CHECK_STR(c->called[1]->name, "b1");
  }
  hlo_module_free(module);
}

static void constants_hold_their_values(void) {
  hlo_module *module = parse_text(
      "HloModule m\n"
      "ENTRY e {\n"
      "  a = f32[4] constant({inf, -inf, nan, -nan(0x7f)})\n"
      "  b = u64[] constant(18446744073709551615)\n"
      "  c = s8[2] constant({-128, 127})\n"
      "  d = pred[] constant(true)\n"
      "  e = pred[3] constant({1, 0, 1})\n"
      "  f = f32[0]{0} constant({})\n"
      "  g = f32[2,0] constant({ {}, {} })\n"
      "  h = (f32[], (s32[2], pred[])) constant((1.5, ({3, 4}, false)))\n"
      "  i = f64[2,2] constant({{1e-05, -2.5e+10}, {0.1, 3}})\n"
      "  j = bf16[] constant(1.0078125)\n"
      "  k = (c64[], f32[]) constant(((1, 2), 7))\n"
      "  ROOT t = () tuple()\n"
      "}\n");
  if (!module) return;
  const float *a = find_instr(module, NULL, "a")->literal->data;
  CHECK(isinf(a[0]) && a[0] > 0 && isinf(a[1]) && a[1] < 0 && isnan(a[2]) && isnan(a[3]) && signbit(a[3]));
  CHECK(*(uint64_t *)find_instr(module, NULL, "b")->literal->data == UINT64_MAX);
  const int8_t *c = find_instr(module, NULL, "c")->literal->data;
  CHECK(c[0] == -128 && c[1] == 127);
  CHECK(*(uint8_t *)find_instr(module, NULL, "d")->literal->data == 1);
  const uint8_t *e = find_instr(module, NULL, "e")->literal->data;
  CHECK(e[0] == 1 && e[1] == 0 && e[2] == 1);
  CHECK(find_instr(module, NULL, "f")->literal->shape.dims[0] == 0);
  CHECK(find_instr(module, NULL, "g")->literal->shape.dims[1] == 0);
  hlo_literal *h = find_instr(module, NULL, "h")->literal;
  CHECK(h->elements && !h->data);
  if (h->elements) {
    CHECK(*(float *)h->elements[0].data == 1.5f);
    CHECK(h->elements[1].elements && ((int32_t *)h->elements[1].elements[0].data)[1] == 4);
    CHECK(*(uint8_t *)h->elements[1].elements[1].data == 0);
  }
  const double *i = find_instr(module, NULL, "i")->literal->data;
  CHECK(i[0] == 1e-05 && i[1] == -2.5e10 && i[2] == 0.1 && i[3] == 3);
  CHECK_EQ_INT(*(uint16_t *)find_instr(module, NULL, "j")->literal->data, 0x3f81);
  hlo_literal *k = find_instr(module, NULL, "k")->literal;
  CHECK(k->elements && k->elements[0].raw_text && strcmp(k->elements[0].raw_text, "(1, 2)") == 0);
  if (k->elements) CHECK(*(float *)k->elements[1].data == 7.0f);
  hlo_module_free(module);
}

static void elided_constants_are_deterministic(void) {
  const char *text =
      "HloModule m\n"
      "ENTRY e {\n"
      "  w = f32[64,32]{1,0} constant({...})\n"
      "  v = f32[64,32]{1,0} constant({...})\n"
      "  h = bf16[1000] constant({ ... })\n"
      "  i = s32[100] constant({...})\n"
      "  p = pred[10] constant({...})\n"
      "  ROOT f = f8e4m3fn[4] constant({...})\n"
      "}\n";
  hlo_module *one = parse_text(text), *two = parse_text(text);
  if (!one || !two) {
    hlo_module_free(one);
    hlo_module_free(two);
    return;
  }
  hlo_literal *w1 = find_instr(one, NULL, "w")->literal, *w2 = find_instr(two, NULL, "w")->literal;
  hlo_literal *v1 = find_instr(one, NULL, "v")->literal;
  CHECK(w1->elided && w1->data && memcmp(w1->data, w2->data, 64 * 32 * 4) == 0);
  CHECK(memcmp(w1->data, v1->data, 64 * 32 * 4) != 0); /* names seed the values */
  bool in_range = true;
  for (int k = 0; k < 64 * 32; k++) {
    float x = ((float *)w1->data)[k];
    in_range &= x >= -1.0f && x < 1.0f;
  }
  CHECK(in_range);
  const uint16_t *h = find_instr(one, NULL, "h")->literal->data;
  in_range = true;
  for (int k = 0; k < 1000; k++) {
    float x = hlo_bf16_to_f32(h[k]);
    in_range &= x >= -1.0f && x < 1.0f;
  }
  CHECK(in_range);
  const int32_t *ints = find_instr(one, NULL, "i")->literal->data;
  in_range = true;
  for (int k = 0; k < 100; k++) in_range &= ints[k] >= 0 && ints[k] < 8;
  CHECK(in_range);
  const uint8_t *pred = find_instr(one, NULL, "p")->literal->data;
  CHECK(pred[0] != pred[1] && pred[1] != pred[2] && pred[0] == pred[2]);
  hlo_literal *f8 = find_instr(one, NULL, "f")->literal;
  CHECK(f8->elided && !f8->data && f8->raw_text);
  hlo_module_free(one);
  hlo_module_free(two);
}

static void several_modules_split_on_separator(void) {
  const char *text =
      "// RUN: something | FileCheck %s\n"
      "HloModule a\n"
      "ENTRY e { ROOT p = f32[] parameter(0) }\n"
      "// -----\n"
      "HloModule b\n"
      "// CHECK: x\n"
      "ENTRY e { ROOT p = s32[] parameter(0) }\n"
      "  // -----  \n";
  hlo_module **modules = NULL;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  int count = hlo_parse_modules(text, strlen(text), "t.hlo", &modules, &diag);
  CHECK_MSG(count == 2, "%s", diag.message);
  if (count == 2) {
    CHECK_STR(modules[0]->name, "a");
    CHECK_STR(modules[1]->name, "b");
    CHECK(modules[1]->entry->root->shape.dtype == HLO_S32);
  }
  for (int i = 0; i < count; i++) hlo_module_free(modules[i]);
  free(modules);
  /* an error in the second module points into the second module */
  const char *bad = "HloModule a\nENTRY e { ROOT p = f32[] parameter(0) }\n// -----\nHloModule b\nENTRY e { ROOT p = f32[] parameter(x) }\n";
  hlo_diag_clear(&diag);
  count = hlo_parse_modules(bad, strlen(bad), "t.hlo", &modules, &diag);
  CHECK(count == -1 && modules == NULL);
  CHECK_MSG(strncmp(diag.message, "t.hlo:5:36: error:", 18) == 0, "%s", diag.message);
  /* hlo_parse_module takes only one */
  hlo_diag_clear(&diag);
  CHECK(hlo_parse_module(text, strlen(text), "t.hlo", &diag) == NULL);
  CHECK_MSG(strstr(diag.message, "t.hlo:5:1: error:") != NULL, "%s", diag.message);
}

static void long_lines_parse(void) {
  /* one instruction with 20000 operands, each with its shape, on one 400 KB line */
  int n = 20000;
  size_t cap = (size_t)n * 48 + 4096;
  char *text = malloc(cap);
  size_t len = (size_t)snprintf(text, cap, "HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT t = (");
  for (int i = 0; i < n; i++) len += (size_t)snprintf(text + len, cap - len, "%sf32[]", i ? ", " : "");
  len += (size_t)snprintf(text + len, cap - len, ") tuple(");
  for (int i = 0; i < n; i++) len += (size_t)snprintf(text + len, cap - len, "%s/*index=%d*/f32[] %%p", i ? ", " : "", i);
  len += (size_t)snprintf(text + len, cap - len, ")\n}\n");
  hlo_diag diag;
  hlo_diag_clear(&diag);
  hlo_module *module = hlo_parse_module(text, len, "long.hlo", &diag);
  CHECK_MSG(module != NULL, "%s", diag.message);
  if (module) CHECK(module->entry->root->operand_count == n && module->entry->root->shape.tuple_count == n);
  hlo_module_free(module);
  free(text);
}

/* ---- malformed input ---- */

static const struct bad_case {
  const char *text;
  const char *where; /* "LINE:COL" */
  const char *says;  /* part of the message */
} bad_cases[] = {
    {"", "1:1", "found end of input"},
    {"HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n", "4:1", "expected '}' to close computation 'e'"},
    {"HloModule m\nENTRY e {\n  p = f32[2", "3:12", "expected ',' or ']'"},
    {"HloModule m\nENTRY e {\n  p = f33[2] parameter(0)\n}", "3:7", "unknown element type 'f33'"},
    {"HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT a = f32[] frobnicate(p)\n}", "4:18", "unknown opcode 'frobnicate'"},
    {"HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT a = f32[] add(p, q)\n}", "4:25", "undefined operand 'q'"},
    {"HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  q = f32[] parameter(0)\n  ROOT a = f32[] add(p, q)\n}", "4:3", "parameter number 0 is used twice"},
    {"HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  q = f32[] parameter(2)\n  ROOT a = f32[] add(p, q)\n}", "4:3", "out of range"},
    {"HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0), metadata={op_name=\"x\"\n", "3:41", "unclosed '{'"},
    {"HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0), metadata={op_name=\"x\"\n}\n", "5:1", "expected '}' to close computation"},
    {"HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0), sharding={devices=[2,2)}\n}", "3:54", "mismatched bracket: expected ']'"},
    {"HloModule m\nENTRY e {\n  ROOT p = f32[1,1,1,1,1,1,1,1,1,1,1,1,1] parameter(0)\n}", "3:40", "more than 12 dimensions"},
    {"HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(x)\n}", "3:28", "expected an integer"},
    {"HloModule m\nENTRY e {\n  ROOT c = f32[] constant(1.2.3)\n}", "3:27", "'1.2.3' is not a number"},
    {"HloModule m\nENTRY e {\n  ROOT c = s8[] constant(300)\n}", "3:26", "'300' is not a s8"},
    {"HloModule m\nENTRY e {\n  ROOT c = u32[2] constant({1, -1})\n}", "3:32", "'-1' is not a u32"},
    {"HloModule m\nENTRY e {\n  ROOT p = f32[-1] parameter(0)\n}", "3:16", "cannot be negative"},
    {"HloModule m\nENTRY e {\n  ROOT p = f32[2,3]{5,0} parameter(0)\n}", "3:21", "layout entry 5"},
    {"HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  p = f32[] negate(p)\n}", "4:3", "duplicate instruction name 'p'"},
    {"HloModule m\nc { ROOT p = f32[] parameter(0) }\nc { ROOT p = f32[] parameter(0) }\n", "3:1", "duplicate computation name 'c'"},
    {"HloModule m\nENTRY e {\n  p = f32[2] parameter(0)\n  ROOT r = f32[] reduce(p, p), dimensions={0}, to_apply=nope\n}", "4:57", "undefined computation 'nope'"},
    {"HloModule m\nENTRY e {\n  p = f32[4] parameter(0)\n  ROOT s = f32[2] slice(p), slice={[0:2}\n}", "4:40", "expected ']' to end a slice dimension, found '}'"},
    {"HloModule m\nENTRY e {\n  ROOT k = f32[] custom-call(), custom_call_target=\"foo\n}", "3:52", "unterminated string"},
    {"HloModule m\nENTRY e {\n  /* no end\n  ROOT p = f32[] parameter(0)\n}", "3:3", "unterminated /* comment"},
    {"HloModule m\nENTRY e {\n  ROOT c = f32[3] constant({1, 2})\n}", "3:28", "has 2 values, its shape f32[3] needs 3"},
    {"HloModule m\nENTRY e {\n  ROOT c = f32[2] constant({1, 2, 3})\n}", "3:35", "too many values"},
    {"HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT c = pred[] compare(p, p), direction=XX\n}", "4:44", "expected a comparison direction"},
    {"HloModule m\nENTRY e {\n  p = f32[4,4] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[2,2] reduce-window(p, z), window={size=2x2 stride=2}, to_apply=e\n}", "5:59", "window stride has 1 dimensions"},
    {"HloModule m\nENTRY e {\n  p = f32[1,4,4,1] parameter(0)\n  ROOT c = f32[1,4,4,1] convolution(p, p), dim_labels=b01f_01io\n}", "4:55", "expected dim_labels like"},
    {"HloModule m\nENTRY e {\n}", "3:1", "has no instructions"},
    {"HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0)\n  ROOT q = f32[] negate(p)\n}", "4:3", "second ROOT"},
    {"HloModule m\nENTRY a { ROOT p = f32[] parameter(0) }\nENTRY b { ROOT p = f32[] parameter(0) }\n", "3:1", "second ENTRY"},
    {"HloModule m\nENTRY e {\n  a = f32[] negate(b)\n  ROOT b = f32[] negate(a)\n}", "2:9", "cycle"},
    {"HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT c = f32[] call(p), to_apply=e\n}", "1:1", "calls itself"},
    {"HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(0) $\n}", "3:31", "unexpected character"},
    {"HloModule\n", "2:1", "expected the module's name"},
    {"HloModule m\nENTRY e {\n  ROOT c = f32[1000000000000] constant({...})\n}", "3:40", "too large to fill"},
    {"HloModule m\nENTRY e {\n  p f32[] parameter(0)\n}", "3:5", "expected '=' after the instruction name"},
    {"HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT a = f32[] add(p, p\n}", "5:1", "expected ',' or ')' after an operand"},
    {"HloModule m\nENTRY e {\n  ROOT p = f32[] parameter(-1)\n}", "3:28", "negative parameter number"},
    {"HloModule m\nENTRY e {\n  ROOT c = f32[2,2] constant({1, 2})\n}", "3:31", "expected '{' for dimension 1"},
    {"HloModule m\nENTRY e {\n  ROOT c = f32[] constant()\n}", "3:27", "expected a number"},
    {"HloModule m\nENTRY e {\n  p = f32[] parameter(0)\n  ROOT t = f32[] add(p, p), dimensions={1,x}\n}", "4:43", "expected an integer"},
    {"HloModule m\nENTRY e ( -> f32[] {\n  ROOT p = f32[] parameter(0)\n}", "2:11", "expected a parameter name"},
    {"HloModule m\nENTRY e {\n  ROOT t = ((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((f32[]))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))))) parameter(0)\n}", "3:76", "nested too deeply"},
};

static void malformed_input_gives_located_errors(void) {
  for (size_t i = 0; i < sizeof bad_cases / sizeof bad_cases[0]; i++) {
    const struct bad_case *c = &bad_cases[i];
    hlo_diag diag;
    hlo_diag_clear(&diag);
    hlo_module *module = hlo_parse_module(c->text, strlen(c->text), "bad.hlo", &diag);
    char prefix[64];
    snprintf(prefix, sizeof prefix, "bad.hlo:%s: error: ", c->where);
    CHECK_MSG(module == NULL, "case %zu parsed", i);
    CHECK_EQ_INT(diag.status, HLO_ERR_INPUT);
    CHECK_MSG(strncmp(diag.message, prefix, strlen(prefix)) == 0 && strstr(diag.message, c->says),
              "case %zu: got \"%s\", want \"%s...%s\"", i, diag.message, prefix, c->says);
    hlo_module_free(module);
  }
}

static void missing_file_is_an_error(void) {
  hlo_module **modules = (hlo_module **)1;
  hlo_diag diag;
  hlo_diag_clear(&diag);
  CHECK(hlo_parse_file("/nonexistent/x.hlo", &modules, &diag) == -1);
  CHECK(modules == NULL && diag.status != HLO_OK && strstr(diag.message, "/nonexistent/x.hlo"));
}

/* ---- speed ---- */

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void mobilenet_parses_fast(void) {
  FILE *file = fopen(corpus_path("mobilenet_v2.hlo"), "rb");
  CHECK(file != NULL);
  if (!file) return;
  fseek(file, 0, SEEK_END);
  long len = ftell(file);
  fseek(file, 0, SEEK_SET);
  char *text = malloc((size_t)len);
  CHECK(fread(text, 1, (size_t)len, file) == (size_t)len);
  fclose(file);
  double best = 1e9;
  for (int round = 0; round < 5; round++) {
    hlo_diag diag;
    hlo_diag_clear(&diag);
    double start = seconds();
    hlo_module *module = hlo_parse_module(text, (size_t)len, "mobilenet_v2.hlo", &diag);
    double took = seconds() - start;
    CHECK_MSG(module != NULL, "%s", diag.message);
    hlo_module_free(module);
    if (took < best) best = took;
  }
  printf("parse: mobilenet_v2.hlo %.0f KB in %.2f ms: %.0f MB/s\n", len / 1024.0, best * 1e3, len / best / 1e6);
  /* generous, so sanitizer and debug builds pass; -O2 takes well under 20 ms */
  CHECK(best < 1.0);
  free(text);
}

int main(void) {
  RUN(every_corpus_file_parses);
  RUN(corpus_counts_match_grep);
  RUN(isolated_convolution_decodes);
  RUN(while_loop_calls_its_computations);
  RUN(import_attributes_decode);
  RUN(import_constants_decode);
  RUN(llama_collectives_and_slices);
  RUN(optional_parts_and_forward_references);
  RUN(layouts_and_dynamic_dims);
  RUN(attributes_typed_and_raw);
  RUN(conditional_branches);
  RUN(constants_hold_their_values);
  RUN(elided_constants_are_deterministic);
  RUN(several_modules_split_on_separator);
  RUN(long_lines_parse);
  RUN(malformed_input_gives_located_errors);
  RUN(missing_file_is_an_error);
  RUN(mobilenet_parses_fast);
  return TEST_REPORT();
}
