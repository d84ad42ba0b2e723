package io.sbqueue.storage;

import io.delta.storage.HadoopFileSystemLogStore;
import java.io.FileNotFoundException;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.util.Iterator;
import java.util.UUID;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;

/**
 * A Delta LogStore for local file systems that is safe across processes.
 *
 * Delta's own local store checks that a commit file is absent and then renames over it, made
 * exclusive by a JVM monitor only; two JVMs can both pass the check and one commit silently
 * replaces the other. Here a commit file is first written and flushed under a unique temporary
 * name, then published with link(2), which the kernel makes atomic and which fails if the
 * target exists. The losing writer sees FileAlreadyExistsException, exactly what Delta's
 * optimistic commit loop expects, and retries at the next version.
 */
public class LinkLogStore extends HadoopFileSystemLogStore {

    public LinkLogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite,
                      Configuration hadoopConf) throws IOException {
        java.nio.file.Path target = localPath(path);
        java.nio.file.Path parent = target.getParent();
        if (parent == null || !Files.isDirectory(parent)) {
            throw new FileNotFoundException("No such file or directory: " + parent);
        }
        if (!overwrite && Files.exists(target)) {
            throw new FileAlreadyExistsException(path.toString());
        }
        java.nio.file.Path temp = parent.resolve(
            "." + target.getFileName() + "." + UUID.randomUUID() + ".tmp");
        try {
            try (FileChannel channel = FileChannel.open(temp,
                     StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
                 OutputStream out = java.nio.channels.Channels.newOutputStream(channel)) {
                while (actions.hasNext()) {
                    out.write((actions.next() + "\n").getBytes(StandardCharsets.UTF_8));
                }
                out.flush();
                channel.force(true);
            }
            if (overwrite) {
                // A checksum sidecar left by Hadoop's LocalFileSystem would no longer match.
                Files.deleteIfExists(parent.resolve("." + target.getFileName() + ".crc"));
                Files.move(temp, target, StandardCopyOption.REPLACE_EXISTING,
                           StandardCopyOption.ATOMIC_MOVE);
            } else {
                Files.createLink(target, temp);
            }
        } finally {
            Files.deleteIfExists(temp);
        }
    }

    private static java.nio.file.Path localPath(Path path) throws IOException {
        java.net.URI uri = path.toUri();
        if (uri.getScheme() != null && !"file".equals(uri.getScheme())) {
            throw new IOException("LinkLogStore handles local paths only, not " + path);
        }
        return java.nio.file.Paths.get(uri.getPath());
    }

    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return false;
    }
}
