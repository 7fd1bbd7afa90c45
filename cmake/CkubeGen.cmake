# CkubeGen.cmake - generate typed C code from CRDs at build time with
# ckube-gen (docs/ckube-gen.md), for projects built with CMake:
#
#   include(CkubeGen)     # installed in <prefix>/lib/cmake/ckube/
#   add_executable(my-controller main.c)
#   ckube_generate(my-controller PACKAGE samplecrd INPUTS crd/network.yaml)
#
# ckube_generate(TARGET PACKAGE NAME INPUTS FILE_OR_DIR... [KINDS K,...]
#                [OUT_DIR DIR])
#   Runs `ckube-gen --package NAME --out DIR [--kinds K,...] INPUTS...`
#   (KINDS: of OpenAPI documents, only these kinds) whenever an input
#   or ckube-gen itself changes, adds DIR/NAME.c to TARGET's sources and
#   DIR to its include path, so TARGET's code includes "NAME.h". DIR defaults to
#   ${CMAKE_CURRENT_BINARY_DIR}/ckube_gen/TARGET/NAME (one per target, so
#   that two targets may generate one package). Relative inputs are
#   relative to the current source directory. (A directory input is read when the
#   command runs; list its files too for CMake to notice new ones.)
#
# Inside ckube's own tree the ckube-gen target is used; elsewhere the
# program is found on the PATH or as CKUBE_GEN_EXECUTABLE.

function(ckube_generate target)
  cmake_parse_arguments(G "" "PACKAGE;OUT_DIR;KINDS" "INPUTS" ${ARGN})
  if(NOT G_PACKAGE OR NOT G_INPUTS)
    message(FATAL_ERROR "ckube_generate(${target}): give PACKAGE and INPUTS")
  endif()
  if(NOT G_OUT_DIR)
    set(G_OUT_DIR ${CMAKE_CURRENT_BINARY_DIR}/ckube_gen/${target}/${G_PACKAGE})
  endif()
  if(TARGET ckube-gen)
    set(gen $<TARGET_FILE:ckube-gen>)
    set(gen_dep ckube-gen)
  else()
    find_program(CKUBE_GEN_EXECUTABLE ckube-gen REQUIRED)
    set(gen ${CKUBE_GEN_EXECUTABLE})
    set(gen_dep ${CKUBE_GEN_EXECUTABLE})
  endif()
  set(inputs "")
  foreach(in ${G_INPUTS})
    get_filename_component(abs ${in} ABSOLUTE BASE_DIR ${CMAKE_CURRENT_SOURCE_DIR})
    list(APPEND inputs ${abs})
  endforeach()
  set(kinds "")
  if(G_KINDS)
    set(kinds --kinds ${G_KINDS})
  endif()
  set(out_h ${G_OUT_DIR}/${G_PACKAGE}.h)
  set(out_c ${G_OUT_DIR}/${G_PACKAGE}.c)
  # ckube-gen leaves a file whose bytes would not change alone; the touch
  # tells the build the outputs are current.
  add_custom_command(
    OUTPUT ${out_h} ${out_c}
    COMMAND ${CMAKE_COMMAND} -E make_directory ${G_OUT_DIR}
    COMMAND ${gen} --package ${G_PACKAGE} --out ${G_OUT_DIR} ${kinds} ${inputs}
    COMMAND ${CMAKE_COMMAND} -E touch_nocreate ${out_h} ${out_c}
    DEPENDS ${inputs} ${gen_dep}
    COMMENT "ckube-gen: ${G_PACKAGE}"
    VERBATIM)
  target_sources(${target} PRIVATE ${out_c} ${out_h})
  target_include_directories(${target} PRIVATE ${G_OUT_DIR})
endfunction()
