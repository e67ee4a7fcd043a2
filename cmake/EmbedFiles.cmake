# Embeds files into a program as byte arrays: the kernel sources (kernels/**/*.cuh) into the
# library, so that a deployed library carries the exact source its cache keys were computed
# from, and the CLI's data (tools/data/*) into the CLI, so that it needs no file beside it.
# Each file is named by its path below `root` ("common/ptx_mma.cuh"): for kernels, the name
# their #include directives use.
#   mlajit_embed_files(OUTPUT out.cpp ROOT dir HEADER "x/y.h" NAMESPACE ns FUNCTION fn
#                      FILES f1 f2 ...)
# writes out.cpp defining `const std::map<std::string, std::string_view>& ns::fn()`, declared
# by HEADER (which includes <map>, <string>, <string_view>).
function(mlajit_embed_files)
  cmake_parse_arguments(EMBED "" "OUTPUT;ROOT;HEADER;NAMESPACE;FUNCTION;COMMENT" "FILES" ${ARGN})
  add_custom_command(
    OUTPUT ${EMBED_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${EMBED_OUTPUT} -DROOT=${EMBED_ROOT}
            -DHEADER=${EMBED_HEADER} -DNAMESPACE=${EMBED_NAMESPACE} -DFUNCTION=${EMBED_FUNCTION}
            "-DFILES=${EMBED_FILES}" -P ${PROJECT_SOURCE_DIR}/cmake/embed_files_script.cmake
    DEPENDS ${EMBED_FILES} ${PROJECT_SOURCE_DIR}/cmake/embed_files_script.cmake
    COMMENT "${EMBED_COMMENT}"
    VERBATIM)
endfunction()
