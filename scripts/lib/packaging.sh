# Shared by scripts/release and scripts/check-deploy (sourced, not run).

# deb_unit UNIT: the systemd unit as the .deb installs it, on stdout: the
# binary in /usr/bin instead of /usr/local/bin, and a header that says so
# instead of the source unit's install steps.
deb_unit() {
  echo "# Sluice as a systemd service, installed by the sluice package."
  echo "# Edit /etc/sluice/topology.yaml and /etc/sluice/config.yaml, check them with"
  echo "#   sudo -u sluice sluice validate-config --topology-file /etc/sluice/topology.yaml \\"
  echo "#     --config-file /etc/sluice/config.yaml"
  echo "# then: systemctl enable --now sluice. More flags: /etc/default/sluice."
  echo
  sed -n '/^\[Unit\]/,$p' "$1" | sed 's#/usr/local/bin/sluice#/usr/bin/sluice#g'
}
