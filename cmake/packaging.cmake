# Installing dais (`cmake --install build/release`) and its Debian package
# (`cpack -G DEB --config build/release/CPackConfig.cmake`, docs/operations.md "Installing"):
# the binary, the systemd units, their settings under /etc/dais, the monitoring pack and the docs.
if(CMAKE_INSTALL_PREFIX_INITIALIZED_TO_DEFAULT)
  # The units run /usr/bin/dais, as the package installs it.
  set(CMAKE_INSTALL_PREFIX "/usr" CACHE PATH "Install prefix" FORCE)
endif()
include(GNUInstallDirs)

install(TARGETS dais RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT dais)
file(GLOB DAIS_UNITS ${PROJECT_SOURCE_DIR}/deploy/systemd/*.service)
install(FILES ${DAIS_UNITS} DESTINATION lib/systemd/system COMPONENT dais)
# Absolute: /etc whatever the prefix (the units read /etc/dais/*.env).
install(FILES ${PROJECT_SOURCE_DIR}/deploy/config/node.env
              ${PROJECT_SOURCE_DIR}/deploy/config/scheduler.env
              ${PROJECT_SOURCE_DIR}/deploy/config/gateway.env
              ${PROJECT_SOURCE_DIR}/deploy/config/console.env
        DESTINATION /etc/dais COMPONENT dais)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/prometheus ${PROJECT_SOURCE_DIR}/deploy/examples
        DESTINATION ${CMAKE_INSTALL_DATADIR}/dais COMPONENT dais)
if(EXISTS ${PROJECT_SOURCE_DIR}/deploy/grafana)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/deploy/grafana DESTINATION ${CMAKE_INSTALL_DATADIR}/dais
          COMPONENT dais)
endif()
# Bash completion, written by the installed binary itself (`dais completion bash`).
install(CODE "
  set(dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DATADIR}/bash-completion/completions\")
  file(MAKE_DIRECTORY \"\${dir}\")
  execute_process(COMMAND $<TARGET_FILE:dais> completion bash OUTPUT_FILE \"\${dir}/dais\"
                  RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR \"dais completion bash failed: \${rc}\")
  endif()" COMPONENT dais)
file(GLOB DAIS_DOCS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${DAIS_DOCS} ${PROJECT_SOURCE_DIR}/README.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT dais)

set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "dais")
set(CPACK_PACKAGE_VENDOR "dais")
set(CPACK_PACKAGE_CONTACT "dais developers <dais@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "distributed AI serving: KServe v2 / Triton-compatible server, scheduler, gateway, features")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_STRIP_FILES ON)  # the build carries -g: 390 MB unstripped
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # dais_<version>_amd64.deb
set(CPACK_DEBIAN_PACKAGE_SECTION "net")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # Depends: from the libraries the binary links
set(CPACK_DEBIAN_COMPRESSION_TYPE "gzip")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA "${PROJECT_SOURCE_DIR}/deploy/debian/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
