# Debian packages with CPack, one per install component (see
# packaging/README.md for why the split):
#   libpvllm1        runtime: libpvllm.so.1 (the package is named after the SONAME)
#   libpvllm-dev     dev: headers, the libpvllm.so link, CMake package, pvllm.pc
#   pvllm            cli: the pvllm command
#   libpvllm-cuda1   cuda: the CUDA module, only when it is built
# Build them from a configured and built tree:
#   cpack --config build/CPackConfig.cmake -B <dir>
# The homepage and maintainer address are placeholders of the project, to
# be set at release.
set(PVLLM_DEB_MAINTAINER "pvllm maintainers <maintainers@pvllm.example.org>")
set(PVLLM_DEB_HOMEPAGE "https://pvllm.example.org")
string(TIMESTAMP PVLLM_DEB_DATE "%a, %d %b %Y %H:%M:%S +0000" UTC)  # honours SOURCE_DATE_EPOCH

set(pvllm_deb_packages runtime libpvllm1 dev libpvllm-dev cli pvllm)
if(TARGET pvllm_cuda)
  list(APPEND pvllm_deb_packages cuda libpvllm-cuda1)
endif()

# Debian wants copyright and changelog in /usr/share/doc/<package>/ of each
# package. EXCLUDE_FROM_ALL: only packaging installs them, not `cmake --install`.
set(pvllm_deb_dir ${CMAKE_CURRENT_BINARY_DIR}/deb)
configure_file(deb/changelog.in ${pvllm_deb_dir}/changelog @ONLY)
find_program(PVLLM_GZIP gzip)
if(PVLLM_GZIP)
  execute_process(COMMAND ${PVLLM_GZIP} -9nc ${pvllm_deb_dir}/changelog
                  OUTPUT_FILE ${pvllm_deb_dir}/changelog.gz)
endif()
set(pvllm_deb_components "")
while(pvllm_deb_packages)
  list(POP_FRONT pvllm_deb_packages component package)
  list(APPEND pvllm_deb_components ${component})
  string(TOUPPER ${component} c)
  set(CPACK_DEBIAN_${c}_PACKAGE_NAME ${package})
  install(FILES deb/copyright DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package}
          COMPONENT ${component} EXCLUDE_FROM_ALL)
  if(PVLLM_GZIP)
    install(FILES ${pvllm_deb_dir}/changelog.gz DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package}
            COMPONENT ${component} EXCLUDE_FROM_ALL)
  endif()
endwhile()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME pvllm)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "pvllm")
set(CPACK_PACKAGE_CONTACT "${PVLLM_DEB_MAINTAINER}")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_COMPONENTS_ALL ${pvllm_deb_components})
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${PVLLM_DEB_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_HOMEPAGE "${PVLLM_DEB_HOMEPAGE}")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Library dependencies (libsentencepiece0, libpcre2-8-0, libutf8proc2,
# libstdc++6, ...) come from dpkg-shlibdeps; libpvllm1 gets a shlibs file.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# The pvllm command needs libpvllm.so.1 of libpvllm1 (a dependency of the
# component): dpkg-shlibdeps finds it in the build tree.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/capi)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)

set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
# dpkg runs ldconfig through its trigger (what Debian asks of a library
# package in /usr/lib), besides CPack's postinst call.
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA ${CMAKE_CURRENT_SOURCE_DIR}/deb/triggers)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "embeddable LLM inference engine - shared library
pvllm runs large language models inside a program: a paged KV cache,
continuous batching with chunked prefill, prefix caching and preemption,
a CPU backend and a CUDA backend, behind one stable C ABI.
.
This package holds the shared library libpvllm.so.${PVLLM_ABI_VERSION}.")
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION "embeddable LLM inference engine - development files
pvllm runs large language models inside a program behind one stable C ABI.
.
This package holds the C header pvllm/pvllm.h, the header-only C++17 layer
pvllm/pvllm.hpp, the CMake package (find_package(pvllm), target
pvllm::pvllm) and pvllm.pc for pkg-config.")
set(CPACK_DEBIAN_CLI_PACKAGE_SECTION science)
set(CPACK_DEBIAN_CLI_DESCRIPTION "embeddable LLM inference engine - command-line tool
pvllm runs large language models inside a program behind one stable C ABI.
.
This package holds the pvllm command: generate, chat, tokenize, inspect
models and benchmark from the shell; and pvllm-server, an OpenAI-compatible
HTTP server (chat and text completions, streaming, Prometheus metrics).")
set(CPACK_DEBIAN_CUDA_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_CUDA_DESCRIPTION "embeddable LLM inference engine - CUDA backend
pvllm runs large language models inside a program behind one stable C ABI.
.
This package holds libpvllm_cuda.so, the CUDA backend that libpvllm loads
when an engine asks for a CUDA device. It needs an NVIDIA driver and the
CUDA runtime libraries (cuBLAS) of NVIDIA's repository.")
# cuBLAS comes from NVIDIA's repository, which dpkg does not know here, so
# dpkg-shlibdeps cannot run: the CUDA module names its Debian dependencies
# itself (the C and C++ runtimes its NEEDED entries list besides cuBLAS)
# and depends on libpvllm1 through the component dependency.
set(CPACK_DEBIAN_CUDA_PACKAGE_SHLIBDEPS OFF)
set(CPACK_DEBIAN_CUDA_PACKAGE_DEPENDS "libc6 (>= 2.34), libgcc-s1 (>= 3.0), libstdc++6 (>= 12)")
if(TARGET pvllm_cuda)
  install(FILES deb/libpvllm-cuda1.lintian-overrides RENAME libpvllm-cuda1
          DESTINATION ${CMAKE_INSTALL_DATADIR}/lintian/overrides COMPONENT cuda EXCLUDE_FROM_ALL)
endif()

include(CPack)
cpack_add_component(runtime DISPLAY_NAME "libpvllm")
cpack_add_component(dev DISPLAY_NAME "libpvllm development files" DEPENDS runtime)
cpack_add_component(cli DISPLAY_NAME "pvllm command" DEPENDS runtime)
if(TARGET pvllm_cuda)
  cpack_add_component(cuda DISPLAY_NAME "libpvllm CUDA backend" DEPENDS runtime)
endif()
