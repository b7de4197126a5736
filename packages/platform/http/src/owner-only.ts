/**
 * Data on disk is its owner's only: the Raft logs and snapshots (LevelDB), object stores, stream partitions, logs
 * and tokens hold user data and secrets. Set once at the start of every process that writes data (members,
 * workers, the CLI that creates the data folders), so every folder is created 0700 and every file 0600, whatever
 * mode a library asks for (LevelDB asks 0644) and whatever umask the shell had.
 */
export const OWNER_ONLY_UMASK = 0o077;

/** Restricts this process's new files and folders to their owner (the process umask; call it before any I/O). */
export function ownerOnlyFiles(): void {
  process.umask(OWNER_ONLY_UMASK);
}
