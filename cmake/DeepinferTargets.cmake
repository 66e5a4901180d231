# Helpers that give every DeepInfer target the same warnings and layout rules.
#
# di_add_module(NAME SOURCES ... DEPS ...) makes the static library `deepinfer_<NAME>`; a module
# sees only the modules it names in DEPS, so a forbidden include fails the build
# (ARCHITECTURE.md: base -> tensor -> backend; io -> base; tokenizer -> structured; ...).

function(di_set_warnings target)
  if(CMAKE_CXX_COMPILER_ID MATCHES "GNU|Clang")
    target_compile_options(${target} PRIVATE
      $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor
        -Wcast-align -Wunused -Woverloaded-virtual -Wnull-dereference -Wimplicit-fallthrough>)
    if(DEEPINFER_WERROR)
      target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Werror>)
    endif()
  endif()
endfunction()

function(di_add_module name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(deepinfer_${name} STATIC ${ARG_SOURCES})
  add_library(deepinfer::${name} ALIAS deepinfer_${name})
  target_include_directories(deepinfer_${name} PUBLIC
    ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/include)
  target_link_libraries(deepinfer_${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  di_set_warnings(deepinfer_${name})
endfunction()

# di_add_gtest(NAME SOURCES ... DEPS ...): one test binary registered with CTest. Tests find
# the shared/ folder and the repository's test data through environment variables set here.
function(di_add_gtest name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  di_set_warnings(${name})
  add_test(NAME ${name} COMMAND ${name})
  set_tests_properties(${name} PROPERTIES ENVIRONMENT
    "DEEPINFER_SOURCE_DIR=${PROJECT_SOURCE_DIR};DEEPINFER_SHARED_DIR=${PROJECT_SOURCE_DIR}/../shared")
endfunction()
