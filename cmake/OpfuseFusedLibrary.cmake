# opfuse_add_fused_library(<name>
#     GRAPH <graph.json | model.onnx>
#     [MODEL <model name>]            # registry key; default: <name>
#     STRATEGY fused | unfused | Mullapudi2016 | Adams2019 | Li2018 | Anderson2021
#     TARGETS host [x86-avx2] [x86-avx512] [host-opencl] [host-cuda]
#     [PROFILE <built-in profile | profile.json>]
#     [PLAN <plan.json>]              # fused only: build these groups instead of the planner's
#     [WEIGHTS embed | file | args]   # default: embed
#     [DIMS <name>=<size>...]         # sizes of the model's symbolic dimensions (a dynamic
#                                     # batch built at one size; `opfuse compile --dim
#                                     # batch=MIN..MAX` makes a library for a range)
#     [AUTOSCHEDULER_PARAMS <key=value>...])  # e.g. autoscheduler.beam_size=32
#
# Builds, at compile time, one Halide library per target from the graph with the generic graph
# generator (generators/graph_generator.cpp), plus the plan JSON beside it
# (<name>_<target>.plan.json, fused and unfused strategies), and an object library <name> that
# registers every kernel with opfuse's runtime registry. Link <name> and call
#   opfuse::runtime::Registry::global().find(model, strategy, target).run(inputs, outputs)
# or the generated C function <name>_<host|opencl|cuda>(...) directly (header <name>_<...>.h).
# WEIGHTS: embed (the default) makes the weights constant data of the library, so its function
# takes the model's inputs and outputs only; file writes them to <name>_<target>.weights beside
# the library, which its entry point maps and checks on first use (the same function and
# arguments: for models too large to embed, see `opfuse compile --embed-limit`); args makes
# every weight a buffer argument after the inputs (the zoo's kernels, which benchmarks feed
# the same weights as their peers). CMake must know a build's outputs when it configures, so
# there is no "auto" here as `opfuse compile` has.
# host-cuda is skipped, with a message, when the CUDA toolkit is absent. Adams2019 and
# Anderson2021 run greedily (beam_size=1) unless AUTOSCHEDULER_PARAMS says otherwise: their
# default beam search takes minutes per model (255 s for the zoo's perception on 2 cores).
# Targets the function builds with: opfuse's own inside its build tree, the imported ones
# (opfuse::...) when found with find_package(opfuse).
if (NOT DEFINED OPFUSE_GENERATOR_TARGET)
  set(OPFUSE_GENERATOR_TARGET opfuse_generators)
  set(OPFUSE_HALIDE_RUNTIME_TARGET opfuse_halide_runtime)
  set(OPFUSE_RUNTIME_TARGET opfuse_runtime)
endif ()

function(opfuse_add_fused_library name)
  cmake_parse_arguments(ARG "" "GRAPH;MODEL;STRATEGY;PROFILE;PLAN;WEIGHTS"
                        "TARGETS;AUTOSCHEDULER_PARAMS;DIMS" ${ARGN})
  if (NOT ARG_GRAPH OR NOT ARG_STRATEGY OR NOT ARG_TARGETS)
    message(FATAL_ERROR "opfuse_add_fused_library(${name}): GRAPH, STRATEGY and TARGETS are required")
  endif ()
  if (NOT ARG_MODEL)
    set(ARG_MODEL "${name}")
  endif ()
  if (NOT ARG_WEIGHTS)
    set(ARG_WEIGHTS embed)
  endif ()
  if (NOT ARG_WEIGHTS MATCHES "^(embed|file|args)$")
    message(FATAL_ERROR "opfuse_add_fused_library(${name}): unknown WEIGHTS '${ARG_WEIGHTS}' "
                        "(embed, file, args)")
  endif ()
  get_filename_component(graph "${ARG_GRAPH}" ABSOLUTE)
  set(autoschedulers Mullapudi2016 Adams2019 Li2018 Anderson2021)
  set(registrations "")
  set(libs "")
  foreach (target IN LISTS ARG_TARGETS)
    if (target STREQUAL "host")
      set(suffix host)
      set(halide_target host)
    elseif (target STREQUAL "x86-avx2" OR target STREQUAL "x86-avx512")
      # An explicit x86 ISA, whatever the build machine has: CI runs the AVX2 code path on
      # every machine, the AVX-512 one where the CPU has it.
      string(REPLACE "x86-" "" suffix "${target}")
      if (target STREQUAL "x86-avx2")
        set(halide_target ${OPFUSE_X86_AVX2_TARGET})
      else ()
        set(halide_target ${OPFUSE_X86_AVX512_TARGET})
      endif ()
    elseif (target STREQUAL "host-opencl")
      set(suffix opencl)
      set(halide_target ${OPFUSE_OPENCL_TARGET})
    elseif (target STREQUAL "host-cuda")
      if (NOT OPFUSE_HAVE_CUDA)
        message(STATUS "opfuse: ${name}: no CUDA toolkit, host-cuda skipped")
        continue ()
      endif ()
      set(suffix cuda)
      set(halide_target ${OPFUSE_CUDA_TARGET})
    else ()
      message(FATAL_ERROR "opfuse_add_fused_library(${name}): unknown target '${target}' "
                          "(host, x86-avx2, x86-avx512, host-opencl, host-cuda)")
    endif ()
    set(lib ${name}_${suffix})
    set(params graph=${graph} strategy=${ARG_STRATEGY}
               plan_out=${CMAKE_CURRENT_BINARY_DIR}/${lib}.plan.json)
    if (ARG_PROFILE)
      list(APPEND params profile=${ARG_PROFILE})
    endif ()
    if (ARG_DIMS)
      # name:size,... (a generator parameter's value holds no '=')
      string(REPLACE "=" ":" dims "${ARG_DIMS}")
      string(REPLACE ";" "," dims "${dims}")
      list(APPEND params dims=${dims})
    endif ()
    set(deps ${graph})
    if (ARG_PLAN)
      get_filename_component(plan "${ARG_PLAN}" ABSOLUTE)
      list(APPEND params plan=${plan})
      list(APPEND deps ${plan})
    endif ()
    set(extra "")
    if (ARG_STRATEGY IN_LIST autoschedulers)
      list(APPEND extra AUTOSCHEDULER Halide::${ARG_STRATEGY})
      if (ARG_AUTOSCHEDULER_PARAMS)
        list(APPEND params ${ARG_AUTOSCHEDULER_PARAMS})
      elseif (ARG_STRATEGY STREQUAL "Adams2019" OR ARG_STRATEGY STREQUAL "Anderson2021")
        list(APPEND params autoscheduler.beam_size=1)
      endif ()
    elseif (NOT ARG_STRATEGY STREQUAL "fused" AND NOT ARG_STRATEGY STREQUAL "unfused")
      message(FATAL_ERROR "opfuse_add_fused_library(${name}): unknown STRATEGY '${ARG_STRATEGY}' "
                          "(fused, unfused, ${autoschedulers})")
    endif ()
    if (suffix STREQUAL "cuda")
      list(APPEND extra DEVICE_CODE ${lib}_device_code)
    endif ()
    if (ARG_WEIGHTS STREQUAL "embed")
      list(APPEND params embed_weights=true)
    endif ()
    # With a weights file the generated function is <lib>_impl and <lib> is the entry point the
    # generator writes beside it (<lib>_entry.cpp), which loads the weights and calls it.
    set(halide_lib ${lib})
    if (ARG_WEIGHTS STREQUAL "file")
      set(halide_lib ${lib}_impl)
      list(APPEND params weights_out=${CMAKE_CURRENT_BINARY_DIR}/${lib})
    endif ()
    add_halide_library(${halide_lib} FROM ${OPFUSE_GENERATOR_TARGET} GENERATOR opfuse_graph
                       TARGETS ${halide_target} USE_RUNTIME ${OPFUSE_HALIDE_RUNTIME_TARGET}
                       PARAMS ${params} DEPENDS ${deps} STMT ${lib}_stmt ${extra})
    if (ARG_WEIGHTS STREQUAL "file")
      set(entry ${CMAKE_CURRENT_BINARY_DIR}/${lib}_entry.cpp)
      # The generator wrote these while building ${halide_lib}; this step only declares them.
      set(written ${entry} ${CMAKE_CURRENT_BINARY_DIR}/${lib}.weights
                  ${CMAKE_CURRENT_BINARY_DIR}/${lib}.h)
      add_custom_command(OUTPUT ${written} COMMAND ${CMAKE_COMMAND} -E touch_nocreate ${written}
                         DEPENDS ${halide_lib} VERBATIM)
      add_library(${lib} STATIC ${entry})
      target_include_directories(${lib} PUBLIC ${CMAKE_CURRENT_BINARY_DIR})
      target_link_libraries(${lib} PUBLIC ${halide_lib} ${OPFUSE_RUNTIME_TARGET} ${CMAKE_DL_LIBS})
      set_target_properties(${lib} PROPERTIES POSITION_INDEPENDENT_CODE ON)
    endif ()
    set_property(TARGET ${lib} PROPERTY OPFUSE_STMT "${${lib}_stmt}")
    if (suffix STREQUAL "cuda")
      set_property(TARGET ${lib} PROPERTY OPFUSE_DEVICE_CODE "${${lib}_device_code}")
    endif ()
    string(APPEND registrations
           "#include \"${lib}.h\"\n"
           "static const opfuse::runtime::Registration ${lib}_registration(\n"
           "    \"${ARG_MODEL}\", \"${ARG_STRATEGY}\", \"${target}\", &${lib}_argv, &${lib}_metadata);\n")
    list(APPEND libs ${lib})
  endforeach ()
  set(reg_file "${CMAKE_CURRENT_BINARY_DIR}/${name}_registration.cpp")
  file(GENERATE OUTPUT "${reg_file}"
       CONTENT "// Generated by opfuse_add_fused_library(${name}).\n#include \"runtime/kernel.h\"\n${registrations}")
  add_library(${name} OBJECT "${reg_file}")
  target_link_libraries(${name} PUBLIC ${libs} ${OPFUSE_RUNTIME_TARGET})
endfunction()
