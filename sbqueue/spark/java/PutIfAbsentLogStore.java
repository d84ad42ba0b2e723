package io.sbqueue.storage;

import io.delta.storage.HadoopFileSystemLogStore;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.FileAlreadyExistsException;
import java.util.Arrays;
import java.util.Iterator;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataOutputStreamBuilder;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;

/**
 * A Delta LogStore for object stores with conditional writes (S3's If-None-Match: *).
 *
 * Delta 4.4 ships no S3 log store that claims a version by a conditional write: its
 * S3SingleDriverLogStore checks that a commit file is absent and then writes it, safe only
 * when one JVM writes the table. sbqueue's driver commits and delta-rs claim versions on S3
 * by put-if-absent; this store makes Spark claim them the same way, so every writer of a
 * table shares one protocol. Hadoop's S3A sends If-None-Match: * only for a file created
 * through the builder with the conditional-overwrite option (a plain create(path, false)
 * checks, then overwrites); the refusal surfaces when the stream closes, as an S3 412,
 * and is turned into the FileAlreadyExistsException that Delta's commit loop retries.
 */
public class PutIfAbsentLogStore extends HadoopFileSystemLogStore {

    static final String CONDITIONAL = "fs.option.create.conditional.overwrite";

    public PutIfAbsentLogStore(Configuration hadoopConf) {
        super(hadoopConf);
    }

    @Override
    public void write(Path path, Iterator<String> actions, Boolean overwrite,
                      Configuration hadoopConf) throws IOException {
        FileSystem fs = path.getFileSystem(hadoopConf);
        if (overwrite) {
            try (OutputStream out = fs.create(path, true)) {
                out.write(joined(actions));
            }
            return;
        }
        byte[] body = joined(actions);
        FSDataOutputStreamBuilder<?, ?> builder = fs.createFile(path).overwrite(false);
        builder.must(CONDITIONAL, true);
        try (OutputStream out = builder.build()) {
            out.write(body);
        } catch (IOException e) {
            // A refusal of a retried PUT whose first try landed (its answer lost: a timeout,
            // a 5xx) is this write's own commit: taken as a loss, Delta would commit the same
            // actions again at the next version (decision 052). The object tells: it holds
            // these bytes only if this write put it (a commit's bytes name its own txnId).
            if (!refused(e)) {
                throw e;
            }
            if (!holds(fs, path, body)) {
                throw new FileAlreadyExistsException(path.toString());
            }
        }
    }

    private static byte[] joined(Iterator<String> actions) {
        StringBuilder text = new StringBuilder();
        while (actions.hasNext()) {
            text.append(actions.next()).append('\n');
        }
        return text.toString().getBytes(StandardCharsets.UTF_8);
    }

    /** Whether the object at path holds exactly body (false where it cannot be read). */
    static boolean holds(FileSystem fs, Path path, byte[] body) {
        try (InputStream in = fs.open(path)) {
            byte[] stored = in.readNBytes(body.length + 1);
            return Arrays.equals(stored, body);
        } catch (IOException e) {
            return false;
        }
    }

    /** Whether the store refused the write because the object exists (412, or Hadoop's own). */
    static boolean refused(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            String name = t.getClass().getSimpleName();
            String text = String.valueOf(t.getMessage());
            if (name.equals("RemoteFileChangedException") || name.equals("FileAlreadyExistsException")
                    || text.contains("Status Code: 412") || text.contains("PreconditionFailed")) {
                return true;
            }
            if (t.getCause() == t) {
                break;
            }
        }
        return false;
    }

    @Override
    public Boolean isPartialWriteVisible(Path path, Configuration hadoopConf) {
        return false;  // an object appears whole or not at all
    }
}
