/*
 * Unit tests of pg_redact (lib/state/pg.c): a database URL as every
 * message shows it, its password, however written, as ***.
 */
#include <stdlib.h>
#include <string.h>

#include "lib/state/pg.h"
#include "tests/unit/tap.h"

static void
redacts(const char *url, const char *want)
{
	char *got = pg_redact(url);

	is_str(got, want, url);
	ok(strstr(got, "secret") == NULL && strstr(got, "S3") == NULL,
	    "no part of the password is left: %s", got);
	free(got);
}

static void
keeps(const char *url)
{
	char *got = pg_redact(url);

	is_str(got, url, url);
	free(got);
}

int
main(void)
{
	redacts("postgresql://u:secret@h:5432/db", "postgresql://u:***@h:5432/db");
	/* A raw @ in the password: the userinfo ends at the last one. */
	redacts("postgresql://u:p@secret@h/db", "postgresql://u:***@h/db");
	/* Nor does a raw ? or # end it: libpq's userinfo ends at @ or /. */
	redacts("postgresql://u:se?cret@h:1/x", "postgresql://u:***@h:1/x");
	redacts("postgresql://u:se#cret@h:1/x", "postgresql://u:***@h:1/x");
	redacts("postgresql://u:se?cret@h/x?password=S3",
	    "postgresql://u:***@h/x?password=***");
	redacts("postgresql://u:secret@/db?host=/run/pg",
	    "postgresql://u:***@/db?host=/run/pg");
	redacts("postgresql://h/db?password=secret&user=u",
	    "postgresql://h/db?password=***&user=u");
	redacts("postgresql://h/db?user=u&password=secret",
	    "postgresql://h/db?user=u&password=***");
	/* libpq decodes a parameter's name: pass%77ord is password. */
	redacts("postgresql://h/db?pass%77ord=secret&user=u",
	    "postgresql://h/db?pass%77ord=***&user=u");
	redacts("postgresql://h/db?%70%61%73%73%77%6f%72%64=S3",
	    "postgresql://h/db?%70%61%73%73%77%6f%72%64=***");
	redacts("postgresql://u:secret@h/db?password=S3&x=1",
	    "postgresql://u:***@h/db?password=***&x=1");
	/* A query with no path before it is libpq's too. */
	redacts("postgresql://u:pw@h?password=secret",
	    "postgresql://u:***@h?password=***");
	redacts("postgresql://?host=/sock&user=rfp&dbname=t1&password=secret",
	    "postgresql://?host=/sock&user=rfp&dbname=t1&password=***");
	redacts("postgresql://h?password=secret", "postgresql://h?password=***");
	/* The client key's passphrase is a secret too. */
	redacts("postgresql://u@h/db?sslpassword=secret&sslmode=require",
	    "postgresql://u@h/db?sslpassword=***&sslmode=require");
	redacts("postgresql://u@h/db?ssl%70assword=secret",
	    "postgresql://u@h/db?ssl%70assword=***");
	/* A raw / in a password (libpq refuses it, and says the URL). */
	redacts("postgresql://u:pa/secret@h/db", "postgresql://u:***@h/db");
	/* libpq's userinfo ends at the first @: an @ in the query is not. */
	redacts("postgresql://rfp@db.example:5432?password=p@secret",
	    "postgresql://rfp@db.example:5432?password=***");
	redacts("postgresql://rfp@h1:5432,h2:5432?password=Xy7@secret",
	    "postgresql://rfp@h1:5432,h2:5432?password=***");
	/* A raw ? in the user name is the user name's. */
	redacts("postgresql://us?er@127.0.0.1:1/db?password=secret",
	    "postgresql://us?er@127.0.0.1:1/db?password=***");
	/* A parameter's value is no userinfo, however it reads. */
	redacts("postgresql://h/db?application_name=a:***@&password=secret",
	    "postgresql://h/db?application_name=a:***@&password=***");
	redacts("postgresql://[::1]:5432/db?password=secret",
	    "postgresql://[::1]:5432/db?password=***");
	/* A ? in a host's [ ] is the host's; a [ in the path opens nothing. */
	redacts("postgresql://[x?y]/db?password=secret",
	    "postgresql://[x?y]/db?password=***");
	redacts("postgres:///%3F[?password=@]secret",
	    "postgres:///%3F[?password=***");
	redacts("postgresql://u/[db%3Fu=%26?password=]secret:p@",
	    "postgresql://u/[db%3Fu=%26?password=***");
	/* No password: as it was; an @ in a path is no userinfo. */
	keeps("postgresql://u@h/db");
	keeps("postgresql://h/db?user=u&passwordx=1&apassword=2");
	keeps("postgresql:///db?host=/tmp/a@b");
	keeps("postgresql://?host=/tmp/a@b&user=u");
	keeps("postgresql://127.0.0.1:5432/batch@2026");
	keeps("postgresql://[::1]:5432/db@x");
	keeps("postgresql://[::1]/db@x");
	keeps("postgresql://[::1/db@x");
	keeps("postgresql://[");
	keeps("postgresql://h/db?sslpasswordx=1&xsslpassword=2");
	keeps("postgresql://h/db?");
	keeps("postgresql://h/db?&&");
	keeps("not a url");
	return tap_done();
}
