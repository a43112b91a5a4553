# `cmake --install` and the Debian package (`make deb`, CPack): the binary, the bash completion,
# the systemd unit of `trellis serve`, its /etc/trellis/serve.conf (a conffile: an edited one
# survives upgrades), the README; the package's scripts make the trellis system user and
# /var/lib/trellis (packaging/debian/).
include(GNUInstallDirs)

install(TARGETS trellis_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES scripts/completions/trellis.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME trellis)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
# Absolute, as systemd and the unit look for them there whatever the prefix.
install(FILES packaging/trellis.service DESTINATION /lib/systemd/system)
install(FILES packaging/serve.conf DESTINATION /etc/trellis)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME trellis)
set(CPACK_PACKAGE_VENDOR "Trellis")
set(CPACK_PACKAGE_CONTACT "Trellis maintainers <maintainers@trellis.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "LLM inference on the CPU you already own, with an OpenAI-compatible server")
string(CONCAT CPACK_PACKAGE_DESCRIPTION
       "Trellis runs GGUF language models (Llama 3, Qwen, Gemma 3, Phi-3, embedding models) on "
       "the CPU, shares the KV cache of common prompt prefixes between requests, and serves "
       "them over an OpenAI-compatible HTTP API with a chat page. The trellis service runs "
       "`trellis serve` with the flags of /etc/trellis/serve.conf.")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION misc)
# The shared libraries the binary links (MPI when it was found, PCRE2, OpenSSL...) as found by
# dpkg-shlibdeps; useradd for the system user.
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "passwd")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/postinst;${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/prerm;${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/postrm;${CMAKE_CURRENT_SOURCE_DIR}/packaging/debian/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
