"""A small ext4 file system in an image file, loop-mounted as a broker's log directory, and the two
disk faults it makes possible:

- `fill`: the file system runs out of space (a filler file takes every free block; ``-m 0`` at
  mkfs, so root has no reserved blocks left either); `unfill` gives the space back.
- `shutdown`: every later read and write fails with EIO, as on a disk that died (ext4's
  EXT4_IOC_SHUTDOWN, the ioctl ``xfs_io -c shutdown`` sends; the journal is flushed first, so
  what was written stays on the image). `remount` brings it back: unmount (the broker using it
  must be stopped first), mount again (the journal is replayed).

Each mount is recorded with the run (resources.py), so a crashed run's mounts are undone by the
next.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import struct
from pathlib import Path

from cluster.verify.resources import Run, run_cmd

_EXT4_IOC_SHUTDOWN = (2 << 30) | (4 << 16) | (ord("X") << 8) | 125  # _IOR('X', 125, __u32)
_SHUTDOWN_LOGFLUSH = 1
FILLER = ".verify-filler"


class LoopFs:
    def __init__(self, run: Run, image: Path, mount: Path, size_mb: int) -> None:
        self.run, self.image, self.mount, self.size_mb = run, image, mount, size_mb
        self.device = ""  # the loop device while mounted

    def create(self) -> None:
        self.image.parent.mkdir(parents=True, exist_ok=True)
        with self.image.open("wb") as f:
            f.truncate(self.size_mb << 20)  # sparse: only what is written takes space
        run_cmd("mkfs.ext4", "-q", "-m", "0", str(self.image))
        self.mount.mkdir(parents=True, exist_ok=True)
        self._mount()

    def _mount(self) -> None:
        """Through a loop device of its own each time: ``mount -o loop`` would reuse the image's
        device, and with it the old superblock - shut down - while the nodes' mount namespaces
        (``ip netns exec``) still hold the previous mount."""
        self.device = run_cmd("losetup", "--find", "--show", str(self.image)).strip()
        run_cmd("mount", self.device, str(self.mount))
        self.run.add_mount(self.mount)

    def unmount(self) -> None:
        if os.path.ismount(self.mount):
            run_cmd("umount", str(self.mount))
        if self.device:  # still in use in another mount namespace: detached once unused
            run_cmd("losetup", "--detach", self.device, check=False)
            self.device = ""
        self.run.remove_mount(self.mount)

    def remount(self) -> None:
        self.unmount()
        self._mount()

    def fill(self) -> int:
        """Take every free block; the bytes taken."""
        path = self.mount / FILLER
        st = os.statvfs(self.mount)
        with path.open("ab", buffering=0) as f:
            with contextlib.suppress(OSError):  # ENOSPC: it may still have taken most
                os.posix_fallocate(f.fileno(), 0, st.f_bavail * st.f_frsize)
            chunk = b"\0" * 4096
            while True:  # what fallocate could not take, block by block
                try:
                    f.write(chunk)
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
                    break
            return os.fstat(f.fileno()).st_blocks * 512

    def unfill(self) -> None:
        (self.mount / FILLER).unlink(missing_ok=True)

    def shutdown(self) -> None:
        fd = os.open(self.mount, os.O_RDONLY)
        try:
            fcntl.ioctl(fd, _EXT4_IOC_SHUTDOWN, struct.pack("I", _SHUTDOWN_LOGFLUSH))
        finally:
            os.close(fd)
