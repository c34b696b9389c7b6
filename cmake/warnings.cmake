# Warnings as errors on tetrasim's own targets only; third-party headers are SYSTEM.
function(tetra_target_defaults target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Werror -Wno-error=deprecated-declarations>
    # GCC 12 reports false positives on std::string concatenation at -O2 (GCC bug 105329).
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CXX_COMPILER_ID:GNU>>:-Wno-restrict -Wno-error=maybe-uninitialized>)
  if(TETRASIM_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer
                                             -fno-sanitize-recover=undefined)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()

# One library per folder: tetra_library(NAME SOURCES... DEPS ...)
function(tetra_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(tetra_${name} STATIC ${ARG_SOURCES})
  add_library(tetra::${name} ALIAS tetra_${name})
  target_include_directories(tetra_${name} PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/include)
  target_link_libraries(tetra_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  set_target_properties(tetra_${name} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  tetra_target_defaults(tetra_${name})
endfunction()
