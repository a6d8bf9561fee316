# Installs the systemd units and the sysusers.d file with the paths of the
# prefix being installed into (cmake --install --prefix P: units that run
# P/bin/gpp-agent), run from install(CODE) in the top CMakeLists.txt, which
# sets GPP_SRC, GPP_BUILD and the GPP_*_REL / GPP_*_DIR variables. file(INSTALL) adds DESTDIR itself.
function(gpp_full out dir)
  if(IS_ABSOLUTE "${dir}")
    set(${out} "${dir}" PARENT_SCOPE)
  else()
    set(${out} "${CMAKE_INSTALL_PREFIX}/${dir}" PARENT_SCOPE)
  endif()
endfunction()

gpp_full(GPP_BINDIR "${GPP_BINDIR_REL}")
gpp_full(GPP_DOCDIR "${GPP_DOCDIR_REL}")
gpp_full(GPP_EXAMPLESDIR "${GPP_DATADIR_REL}/gpp/examples")
# As GNUInstallDirs: prefix /usr keeps its configuration in /etc.
if(CMAKE_INSTALL_PREFIX STREQUAL "/usr" AND NOT IS_ABSOLUTE "${GPP_SYSCONFDIR_REL}")
  set(GPP_CONFDIR "/etc/gpp")
else()
  gpp_full(GPP_CONFDIR "${GPP_SYSCONFDIR_REL}/gpp")
endif()
gpp_full(unit_dir "${GPP_UNIT_DIR}")
gpp_full(sysusers_dir "${GPP_SYSUSERS_DIR}")

set(tmp "${GPP_BUILD}/gpp_units") # the build tree, not the working directory
file(MAKE_DIRECTORY "${tmp}")
foreach(unit gpp-coordinator.service gpp-agent@.service)
  configure_file("${GPP_SRC}/systemd/${unit}.in" "${tmp}/${unit}" @ONLY)
endforeach()
file(INSTALL "${tmp}/gpp-coordinator.service" "${tmp}/gpp-agent@.service"
     "${GPP_SRC}/systemd/gpp-agents.target" DESTINATION "${unit_dir}")
file(INSTALL "${GPP_SRC}/systemd/sysusers.d/gpp.conf" DESTINATION "${sysusers_dir}")
