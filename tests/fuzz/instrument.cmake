# Included by the top-level CMakeLists.txt before the libraries when TETRASIM_FUZZ is ON:
# every tetrasim library is built with libFuzzer coverage, AddressSanitizer and
# UndefinedBehaviorSanitizer (UB aborts, so the fuzzer reports it as a crash).
if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "TETRASIM_FUZZ needs clang (configure with CC=clang CXX=clang++)")
endif()
add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined
                    -fno-omit-frame-pointer -g)
add_link_options(-fsanitize=address,undefined)
