# vcpkg port of pvllm. REPO, REF and SHA512 are set when a release is
# tagged (packaging/vcpkg/README.md): REF the release tag, SHA512 the hash
# of its source archive (vcpkg prints it on the first install with 0).
# scripts/vcpkg_port_check.sh runs this file's configure OPTIONS, build and
# install in CI and builds a find_package consumer against the result.
vcpkg_check_linkage(ONLY_DYNAMIC_LIBRARY)  # libpvllm is a shared library with a C ABI

vcpkg_from_github(
    OUT_SOURCE_PATH SOURCE_PATH
    REPO pvllm/pvllm
    REF "v${VERSION}"
    SHA512 0
    HEAD_REF main
)

vcpkg_check_features(OUT_FEATURE_OPTIONS FEATURE_OPTIONS
    FEATURES
        cuda PVLLM_CUDA
)

# The .pvllm schema is compiled by the host's flatc (the flatbuffers port's
# tool); the FlatBuffers and xxhash headers come from their ports.
vcpkg_add_to_path("${CURRENT_HOST_INSTALLED_DIR}/tools/flatbuffers")

# pvllm finds sentencepiece, pcre2 and utf8proc through pkg-config.
vcpkg_find_acquire_program(PKGCONFIG)
set(ENV{PKG_CONFIG} "${PKGCONFIG}")

vcpkg_cmake_configure(
    SOURCE_PATH "${SOURCE_PATH}"
    OPTIONS
        ${FEATURE_OPTIONS}
        -DPVLLM_BUILD_TESTS=OFF
        -DPVLLM_BUILD_TOOLS=OFF
        -DPVLLM_BUILD_BENCH=OFF
        -DPVLLM_SANITIZE=OFF
        -DPVLLM_FUZZ=OFF
)
vcpkg_cmake_install()
vcpkg_cmake_config_fixup(CONFIG_PATH lib/cmake/pvllm)
vcpkg_fixup_pkgconfig()

file(REMOVE_RECURSE
    "${CURRENT_PACKAGES_DIR}/debug/include"
    "${CURRENT_PACKAGES_DIR}/debug/share"
    "${CURRENT_PACKAGES_DIR}/share/doc")
file(INSTALL "${CMAKE_CURRENT_LIST_DIR}/usage" DESTINATION "${CURRENT_PACKAGES_DIR}/share/${PORT}")
vcpkg_install_copyright(FILE_LIST "${SOURCE_PATH}/LICENSE")
