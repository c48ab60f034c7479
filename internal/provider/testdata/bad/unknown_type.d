provider myapp {
	probe request__start(pid_t pid, const char *path);
	probe request__done(uint32 status);
};
