package place

// The build stops here on a system tine does not support, with one
// message (see internal/platform).
import _ "tine/internal/platform"
