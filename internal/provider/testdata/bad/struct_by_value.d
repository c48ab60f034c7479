struct request;

provider myapp {
	probe request__start(struct request req);
};
