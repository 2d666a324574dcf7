"""What only the nightly job needs beside the run sequence (rbench.coordinator.sequence): the upload to an object store."""
