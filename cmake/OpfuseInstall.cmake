# `cmake --install`: the runtime (headers, library, the Halide runtime it uses), the graph
# generator, and a CMake package so that an outside project can find_package(opfuse) and call
# opfuse_add_fused_library() on its own graph files.
include(CMakePackageConfigHelpers)
# The installed generator finds libHalide where it was linked from (the Halide wheel).
set_target_properties(opfuse_generators PROPERTIES INSTALL_RPATH_USE_LINK_PATH TRUE)
install(TARGETS opfuse_runtime opfuse_thread_pool opfuse_block_pool opfuse_halide_runtime opfuse_generators EXPORT opfuseTargets
        ARCHIVE DESTINATION lib RUNTIME DESTINATION bin)
install(EXPORT opfuseTargets NAMESPACE opfuse:: DESTINATION lib/cmake/opfuse)
configure_package_config_file(cmake/opfuseConfig.cmake.in
                              "${CMAKE_CURRENT_BINARY_DIR}/opfuseConfig.cmake"
                              INSTALL_DESTINATION lib/cmake/opfuse)
write_basic_package_version_file("${CMAKE_CURRENT_BINARY_DIR}/opfuseConfigVersion.cmake"
                                 COMPATIBILITY SameMinorVersion)
install(FILES "${CMAKE_CURRENT_BINARY_DIR}/opfuseConfig.cmake"
              "${CMAKE_CURRENT_BINARY_DIR}/opfuseConfigVersion.cmake"
              cmake/OpfuseFusedLibrary.cmake
        DESTINATION lib/cmake/opfuse)
