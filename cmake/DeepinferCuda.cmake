# CUDA is optional: the CPU build never needs it. With DEEPINFER_CUDA=AUTO the CUDA parts are
# built whenever a CUDA compiler is found (for sm_90a and sm_100a); later issues add them.
include(CheckLanguage)
set(DEEPINFER_HAVE_CUDA OFF)
if(NOT DEEPINFER_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND EXISTS "/usr/local/cuda/bin/nvcc")
    set(CMAKE_CUDA_COMPILER "/usr/local/cuda/bin/nvcc")
  endif()
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    # Set before enable_language(CUDA), which would otherwise default to nvcc's own (sm_75).
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90a 100a)
    endif()
    enable_language(CUDA)
    set(DEEPINFER_HAVE_CUDA ON)
  elseif(DEEPINFER_CUDA STREQUAL "ON")
    message(FATAL_ERROR "DEEPINFER_CUDA=ON but no CUDA compiler was found: install the CUDA "
                        "toolkit or configure with -DDEEPINFER_CUDA=OFF")
  endif()
endif()
message(STATUS "DeepInfer CUDA backend: ${DEEPINFER_HAVE_CUDA}")
