# Embeds the kernel sources (kernels/**/*.cuh) into the library as byte arrays, so that a
# deployed library carries the exact source its cache keys were computed from. Each file is
# named by its path below `root` ("common/ptx_mma.cuh"): the name its #include directives use.
function(mlajit_embed_kernels output root)
  set(files ${ARGN})
  add_custom_command(
    OUTPUT ${output}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${output} -DROOT=${root} "-DFILES=${files}"
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_kernels_script.cmake
    DEPENDS ${files} ${PROJECT_SOURCE_DIR}/cmake/embed_kernels_script.cmake
    COMMENT "Embedding kernel sources"
    VERBATIM)
endfunction()
