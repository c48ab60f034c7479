provider myapp {
	probe query__start(const char *sql);
	probe query__done(int rows);
	probe query__start(const char *sql, int flags);
};
