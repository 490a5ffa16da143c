# Sourced by testdata/record.sh. The Cursor agent CLI cannot be recorded
# here, and record_cursor says why instead of pretending:
#   - it is not on npm (Cursor installs it with its own download script;
#     the npm package named cursor-agent is an unrelated tool), and no
#     package registry here carries it;
#   - it talks to Cursor's own backend, not to a model API whose base URL
#     could point at bin/baton-modelserver, and it needs a Cursor login or
#     CURSOR_API_KEY, so even an installed binary could not run a scripted
#     turn offline on 127.0.0.1.
# The transcripts in testdata/cursor/ are authored from the documented
# stream-json format (header metadata.source "authored", metadata.basedOn
# names the sources); see .notes/cursor-probe.md.
record_cursor() {
  die "cursor cannot be recorded: cursor-agent is not on npm and needs Cursor's backend and login (no local model API to point at the scripted model server); the transcripts in testdata/cursor are authored, see .notes/cursor-probe.md"
}
