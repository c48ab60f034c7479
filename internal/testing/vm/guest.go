package vm

// GuestConfig is what the host tells the guest's init (package vminit),
// as JSON in the initramfs at ConfigPath.
type GuestConfig struct {
	// Modules are the kernel modules to load, as paths in the initramfs,
	// each after those it depends on.
	Modules []string
	// WorkDir is where the read-write share is mounted in the guest: the
	// host's path of the same directory, so that paths the host wrote
	// into files mean the same thing inside.
	WorkDir string
	// Command runs in the root, from WorkDir, with Env; its output goes to
	// the console and to WorkDir/OutputFile, its exit status to
	// WorkDir/ExitFile. No command: the init powers off at once.
	Command []string
	Env     []string
}

const (
	// ConfigPath is the config's path in the initramfs.
	ConfigPath = "/vm.json"
	// RootTag and WorkTag are the 9p mount tags of the two shares.
	RootTag = "root"
	WorkTag = "work"
	// OutputFile and ExitFile are written by the init into WorkDir.
	OutputFile = ".vm-output"
	ExitFile   = ".vm-exit"
)
