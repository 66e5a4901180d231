# The op harness's registry, its helpers and every op case (op_harness.h): no GoogleTest and no
# CUDA, compiled into both drivers (tests/ops/ops_test and tests/ops/cuda/ops_cuda_test; the
# minimal GPU configuration adds tests/ops/cuda without tests/ops, hence this file). A new case
# file is listed here once.
set(DI_OP_CASE_DIR ${CMAKE_CURRENT_LIST_DIR})
set(DI_OP_CASE_SOURCES
  ${DI_OP_CASE_DIR}/op_harness.cc
  ${DI_OP_CASE_DIR}/cases/shapes.cc
  ${DI_OP_CASE_DIR}/cases/dense.cc
  ${DI_OP_CASE_DIR}/cases/attention.cc
  ${DI_OP_CASE_DIR}/cases/topk.cc
  ${DI_OP_CASE_DIR}/cases/v41.cc
  ${DI_OP_CASE_DIR}/cases/invariance.cc
  ${DI_OP_CASE_DIR}/cases/fill.cc)
