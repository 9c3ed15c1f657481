/* class: the failure classification table of the record contract. */
#ifndef RFP_CLASS_H
#define RFP_CLASS_H

#include <stddef.h>

#include <jansson.h>

enum class_kind {
	CLASS_OK,
	CLASS_TRANSIENT,
	CLASS_PERMANENT
};

/* Classify a fetched record from its status, error and check fields. */
enum class_kind class_of(const json_t *rec, char *reason, size_t len);
/* "ok", "transient" or "permanent". */
const char *class_name(enum class_kind k);

#endif
