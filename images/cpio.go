package images

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// writeInitramfs writes the tree at root as a gzip-compressed cpio (newc)
// archive, the form the kernel unpacks into its initramfs. Deterministic:
// entries in lexical order, owner root, every mtime = epoch, inode numbers
// counted, gzip header without name or time. A /dev/console node is added
// so the kernel has a console for /init before devtmpfs is mounted.
func writeInitramfs(path, root string, epoch int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	bw := bufio.NewWriter(f)
	zw, err := gzip.NewWriterLevel(bw, gzip.BestCompression)
	if err != nil {
		return err
	}
	cw := &cpioWriter{w: zw, mtime: epoch}
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel == "." {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return cw.entry(rel, 0o120777, 0, []byte(target))
		case d.IsDir():
			if err := cw.entry(rel, 0o040000|uint32(info.Mode().Perm()), 0, nil); err != nil {
				return err
			}
			if rel == "dev" {
				return cw.entry("dev/console", 0o020600, 5<<8|1, nil)
			}
			return nil
		case d.Type().IsRegular():
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			return cw.entry(rel, 0o100000|uint32(info.Mode().Perm()), 0, data)
		}
		return fmt.Errorf("images: initramfs: %s: unsupported file type %v", p, d.Type())
	})
	if err == nil {
		err = cw.entry("TRAILER!!!", 0, 0, nil)
	}
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = bw.Flush()
	}
	if err != nil {
		return fmt.Errorf("images: initramfs: %w", err)
	}
	return f.Close()
}

type cpioWriter struct {
	w     io.Writer
	ino   uint32
	mtime int64
}

// entry writes one newc record; rdev is major<<8|minor for device nodes.
func (c *cpioWriter) entry(name string, mode uint32, rdev uint32, data []byte) error {
	c.ino++
	nlink := 1
	if mode&0o170000 == 0o040000 {
		nlink = 2
	}
	ino := c.ino
	if name == "TRAILER!!!" {
		ino, c.mtime = 0, 0
	}
	hdr := fmt.Sprintf("070701%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x%08x",
		ino, mode, 0, 0, nlink, c.mtime, len(data), 0, 0, rdev>>8, rdev&0xff, len(name)+1, 0)
	buf := append([]byte(hdr), name...)
	buf = append(buf, 0)
	buf = append(buf, make([]byte, pad4(len(buf)))...)
	buf = append(buf, data...)
	buf = append(buf, make([]byte, pad4(len(data)))...)
	_, err := c.w.Write(buf)
	return err
}

func pad4(n int) int { return (4 - n%4) % 4 }
