/* One MiniCPM3-style decode batch (3 requests, 1 query token each, 40 heads, ckv 256, kpe 32,
 * bf16, pages of 32 tokens) through the C ABI; checks that every output is finite and a convex mix of
 * the cache rows (|out| <= max |ckv|). Exit 0: it ran and passed, or there is no GPU (the
 * message says so); 1: anything else. */
#include <mlajit/mlajit.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint16_t to_bf16(float value) {
  uint32_t bits;
  memcpy(&bits, &value, 4);
  return (uint16_t)(bits >> 16);
}
static float from_bf16(uint16_t value) {
  uint32_t bits = (uint32_t)value << 16;
  float result;
  memcpy(&result, &bits, 4);
  return result;
}
static void fill_random(uint16_t* values, size_t count, uint32_t seed) {
  for (size_t i = 0; i < count; ++i) {
    seed = seed * 1664525u + 1013904223u;
    values[i] = to_bf16((float)(seed >> 8) / 16777216.0f - 0.5f);
  }
}
static int check(mlajit_status status, const char* what) {
  if (status == MLAJIT_OK) return 1;
  fprintf(stderr, "%s failed: %s: %s\n", what, mlajit_status_name(status), mlajit_last_error());
  return 0;
}
static void* upload(const void* host, size_t bytes) {
  void* device = NULL;
  if (!check(mlajit_device_alloc(0, bytes, &device), "mlajit_device_alloc")) exit(1);
  if (!check(mlajit_memcpy_to_device(device, host, bytes), "mlajit_memcpy_to_device")) exit(1);
  return device;
}

int main(void) {
  enum { kBatch = 3, kPages = 8 };
  const int32_t kv_len[kBatch] = {33, 120, 64};
  const int32_t qo_indptr[kBatch + 1] = {0, 1, 2, 3};
  const int32_t kv_indptr[kBatch + 1] = {0, 2, 6, 8}; /* pages of 32 tokens */
  const int32_t kv_indices[kPages] = {7, 0, 1, 2, 3, 4, 5, 6};
  mlajit_shape shape;
  mlajit_attention_t* attention = NULL;
  mlajit_status status;

  printf("mlajit %s (headers %s)\n", mlajit_version(), MLAJIT_VERSION_STRING);
  mlajit_shape_init(&shape);
  shape.num_heads = 40;
  shape.head_dim_ckv = 256;
  shape.head_dim_kpe = 32;
  shape.page_size = 32;
  status = mlajit_attention_create(&shape, NULL, &attention);
  if (status == MLAJIT_ERROR_NO_DRIVER || status == MLAJIT_ERROR_NO_DEVICE) {
    printf("no GPU, nothing to run: %s\n", mlajit_last_error());
    return 0;
  }
  if (!check(status, "mlajit_attention_create")) return 1;
  {
    const size_t heads = 40, ckv = 256, kpe = 32, page = 32, tokens = kBatch;
    uint16_t* q_nope = malloc(tokens * heads * ckv * 2);
    uint16_t* q_pe = malloc(tokens * heads * kpe * 2);
    uint16_t* ckv_cache = malloc(kPages * page * ckv * 2);
    uint16_t* kpe_cache = malloc(kPages * page * kpe * 2);
    uint16_t* out = malloc(tokens * heads * ckv * 2);
    mlajit_batch batch;
    mlajit_run_args args;
    float largest = 0, worst = 0;
    int ok;
    size_t i;
    fill_random(q_nope, tokens * heads * ckv, 1);
    fill_random(q_pe, tokens * heads * kpe, 2);
    fill_random(ckv_cache, kPages * page * ckv, 3);
    fill_random(kpe_cache, kPages * page * kpe, 4);

    mlajit_batch_init(&batch);
    batch.qo_indptr = qo_indptr;
    batch.kv_indptr = kv_indptr;
    batch.kv_len = kv_len;
    batch.batch_size = kBatch;
    if (!check(mlajit_attention_plan(attention, &batch, NULL), "mlajit_attention_plan")) return 1;

    mlajit_run_args_init(&args);
    args.q_nope = upload(q_nope, tokens * heads * ckv * 2);
    args.q_nope_stride_token = (int64_t)(heads * ckv);
    args.q_nope_stride_head = (int64_t)ckv;
    args.q_pe = upload(q_pe, tokens * heads * kpe * 2);
    args.q_pe_stride_token = (int64_t)(heads * kpe);
    args.q_pe_stride_head = (int64_t)kpe;
    args.ckv = upload(ckv_cache, kPages * page * ckv * 2);
    args.ckv_stride_page = (int64_t)(page * ckv);
    args.ckv_stride_token = (int64_t)ckv;
    args.kpe = upload(kpe_cache, kPages * page * kpe * 2);
    args.kpe_stride_page = (int64_t)(page * kpe);
    args.kpe_stride_token = (int64_t)kpe;
    args.kv_indices = upload(kv_indices, sizeof(kv_indices));
    if (!check(mlajit_device_alloc(0, tokens * heads * ckv * 2, &args.out), "alloc out")) return 1;
    args.out_stride_token = (int64_t)(heads * ckv);
    args.out_stride_head = (int64_t)ckv;
    args.num_tokens = (int64_t)tokens;
    args.sm_scale = 1.0f / sqrtf(128.0f + 32.0f);
    if (!check(mlajit_attention_run(attention, &args, NULL), "mlajit_attention_run")) return 1;
    if (!check(mlajit_memcpy_to_host(out, args.out, tokens * heads * ckv * 2), "copy out")) return 1;

    for (i = 0; i < kPages * page * ckv; ++i) largest = fmaxf(largest, fabsf(from_bf16(ckv_cache[i])));
    for (i = 0; i < tokens * heads * ckv; ++i) {
      const float value = from_bf16(out[i]);
      worst = isfinite(value) ? fmaxf(worst, fabsf(value)) : INFINITY;
    }
    ok = worst <= largest * 1.01f;
    printf("decode batch of %d requests ran: max |out| = %.3f, max |ckv| = %.3f: %s\n", kBatch,
           worst, largest, ok ? "ok" : "WRONG");
    mlajit_device_free((void*)args.q_nope);
    mlajit_device_free((void*)args.q_pe);
    mlajit_device_free((void*)args.ckv);
    mlajit_device_free((void*)args.kpe);
    mlajit_device_free((void*)args.kv_indices);
    mlajit_device_free(args.out);
    mlajit_attention_destroy(attention);
    free(q_nope), free(q_pe), free(ckv_cache), free(kpe_cache), free(out);
    return ok ? 0 : 1;
  }
}
