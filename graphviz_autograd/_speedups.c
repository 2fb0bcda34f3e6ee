/* The hot loops of the walk and of the DOT writer, in C.
 *
 * Optional: graphviz_autograd/speedups.py imports this module when it was built,
 * and walk.py and dot.py fall back on their pure-Python loops when it was not
 * (or when GRAPHVIZ_AUTOGRAD_PURE_PYTHON is set). Both must give the same graph
 * and the same bytes; tests/test_speedups.py holds them to it.
 *
 * Nothing here knows more of PyTorch than walk.py's loop does: it reads
 * grad_fn.next_functions through the ordinary attribute protocol and calls back
 * into the walker for every node that is not a plain op seen before.
 */

#define PY_SSIZE_T_CLEAN
#include <Python.h>

static PyObject *str_next_functions;
static PyObject *str_content_of;
static PyObject *str_variable;
static PyObject *str_shape;
static PyObject *str_dtype;
static PyObject *str_device;
static PyObject *str_tab;
static PyObject *str_space;
static PyObject *str_newline;
static PyObject *str_arrow;
static PyObject *str_empty;
static PyObject *empty_tuple;

/* How often the long loops let Python handle a signal (Ctrl-C in a notebook): a
 * million-op chain should stop within a few milliseconds, not when its walk ends. */
#define SIGNAL_EVERY 65536

static inline int
interrupted(Py_ssize_t step)
{
    return (step & (SIGNAL_EVERY - 1)) == 0 && PyErr_CheckSignals() < 0;
}

/* Stops the cyclic collector from tracking ``tuple`` when nothing in it can be
 * tracked: CPython's own rule for tuples (_PyTuple_MaybeUntrack), which it applies
 * only when a collection comes across them. The walk pauses the collector; the
 * first collection after it would otherwise go over every leaf it made only to
 * untrack them. */
static void
untrack_if_atomic(PyObject *tuple)
{
    if (!PyTuple_CheckExact(tuple) || !PyObject_GC_IsTracked(tuple))
        return;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(tuple); k++) {
        PyObject *item = PyTuple_GET_ITEM(tuple, k);
        if (PyObject_IS_GC(item) && (!PyTuple_CheckExact(item) || PyObject_GC_IsTracked(item)))
            return;
    }
    PyObject_GC_UnTrack(tuple);
}

/* ``block`` (from PyMem_Malloc, or NULL) resized to ``count`` items of ``size`` bytes;
 * NULL with MemoryError set when it cannot be, ``block`` then left as it was. */
static void *
resized(void *block, Py_ssize_t count, size_t size)
{
    void *grown = count > PY_SSIZE_T_MAX / (Py_ssize_t)size ? NULL : PyMem_Realloc(block, count * size);
    if (grown == NULL)
        PyErr_NoMemory();
    return grown;
}

/* --- Links: a walk's edges without a tuple apiece ---------------------------------- */

/* The edges of a walked graph as graph.Columns.links holds them, (source index,
 * target index, Edge[2:]) each, kept as two C integers and a reference rather than
 * a tuple: a chain of a million ops has two million edges, and making and freeing
 * their tuples took a third of its walk. It reads as a sequence of those tuples,
 * each made when read, and pickles and copies as a list of them.
 *
 * Not tracked by the cyclic collector: it holds only the rests of edges, tuples of
 * a kind, a shape and a dtype that refer to no container (append checks the rest is
 * a tuple; the walk makes every one of them). */
typedef struct {
    PyObject_HEAD
    Py_ssize_t *ends; /* the source and target of link k at 2k and 2k + 1 */
    PyObject **rests; /* the rest of link k, owned */
    Py_ssize_t count, capacity;
    /* The ints 0, 1, ... of node indices, made the first time a link is read from
     * Python and shared by every tuple read after: reading a big graph's links then
     * makes one tuple per link rather than a tuple and two ints. */
    PyObject **numbers;
    Py_ssize_t numbers_count;
} Links;

static PyTypeObject Links_Type;

static int
links_push(Links *links, Py_ssize_t source, Py_ssize_t target, PyObject *rest)
{
    if (links->count == links->capacity) {
        Py_ssize_t capacity = links->capacity ? 2 * links->capacity : 64;
        Py_ssize_t *ends = resized(links->ends, capacity, 2 * sizeof(Py_ssize_t));
        if (ends == NULL)
            return -1;
        links->ends = ends;
        PyObject **rests = resized(links->rests, capacity, sizeof(PyObject *));
        if (rests == NULL)
            return -1;
        links->rests = rests;
        links->capacity = capacity;
    }
    Py_INCREF(rest);
    links->ends[2 * links->count] = source;
    links->ends[2 * links->count + 1] = target;
    links->rests[links->count++] = rest;
    return 0;
}

/* The int ``i``, a node index of ``links`` (borrowed from its numbers, made on first need). */
static PyObject *
links_number(Links *links, Py_ssize_t i)
{
    if (i >= links->numbers_count) {
        /* Every index the links name, at once; at least twice as many as before, so that
         * links appended and read by turns do not scan them all again each time. */
        Py_ssize_t count = i < 2 * links->numbers_count ? 2 * links->numbers_count : i + 1;
        for (Py_ssize_t k = 0; k < 2 * links->count; k++) {
            if (links->ends[k] >= count)
                count = links->ends[k] + 1;
        }
        PyObject **numbers = resized(links->numbers, count, sizeof(PyObject *));
        if (numbers == NULL)
            return NULL;
        links->numbers = numbers;
        for (; links->numbers_count < count; links->numbers_count++) {
            if ((numbers[links->numbers_count] = PyLong_FromSsize_t(links->numbers_count)) == NULL)
                return NULL;
        }
    }
    return links->numbers[i];
}

/* Link k as a (source, target, rest) tuple, k in range (new reference). */
static PyObject *
links_tuple(Links *links, Py_ssize_t k)
{
    PyObject *source = links_number(links, links->ends[2 * k]);
    PyObject *target = source == NULL ? NULL : links_number(links, links->ends[2 * k + 1]);
    PyObject *link = target == NULL ? NULL : PyTuple_New(3);
    if (link == NULL)
        return NULL;
    Py_INCREF(source);
    Py_INCREF(target);
    Py_INCREF(links->rests[k]);
    PyTuple_SET_ITEM(link, 0, source);
    PyTuple_SET_ITEM(link, 1, target);
    PyTuple_SET_ITEM(link, 2, links->rests[k]);
    return link;
}

static PyObject *
Links_new(PyTypeObject *type, PyObject *args, PyObject *kwargs)
{
    if (PyTuple_GET_SIZE(args) != 0 || (kwargs != NULL && PyDict_GET_SIZE(kwargs) != 0)) {
        PyErr_SetString(PyExc_TypeError, "Links() takes no arguments: append each link to it");
        return NULL;
    }
    return type->tp_alloc(type, 0); /* zeroed: no links */
}

static void
Links_dealloc(Links *self)
{
    for (Py_ssize_t k = 0; k < self->count; k++)
        Py_DECREF(self->rests[k]);
    for (Py_ssize_t i = 0; i < self->numbers_count; i++)
        Py_DECREF(self->numbers[i]);
    PyMem_Free(self->ends);
    PyMem_Free(self->rests);
    PyMem_Free(self->numbers);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static Py_ssize_t
Links_length(Links *self)
{
    return self->count;
}

static PyObject *
Links_item(Links *self, Py_ssize_t k)
{
    if (k < 0 || k >= self->count) {
        PyErr_SetString(PyExc_IndexError, "link index out of range");
        return NULL;
    }
    return links_tuple(self, k);
}

static PyObject *
Links_subscript(Links *self, PyObject *key)
{
    if (PyIndex_Check(key)) {
        Py_ssize_t k = PyNumber_AsSsize_t(key, PyExc_IndexError);
        if (k == -1 && PyErr_Occurred())
            return NULL;
        return Links_item(self, k < 0 ? k + self->count : k);
    }
    if (!PySlice_Check(key)) {
        PyErr_Format(PyExc_TypeError, "links are indexed by integers or slices, not %.200s", Py_TYPE(key)->tp_name);
        return NULL;
    }
    Py_ssize_t start, stop, step;
    if (PySlice_Unpack(key, &start, &stop, &step) < 0)
        return NULL;
    Py_ssize_t length = PySlice_AdjustIndices(self->count, &start, &stop, step);
    PyObject *list = PyList_New(length);
    if (list == NULL)
        return NULL;
    for (Py_ssize_t i = 0, k = start; i < length; i++, k += step) {
        PyObject *link = links_tuple(self, k);
        if (link == NULL) {
            Py_DECREF(list);
            return NULL;
        }
        PyList_SET_ITEM(list, i, link);
    }
    return list;
}

static PyObject *
Links_richcompare(PyObject *self, PyObject *other, int op)
{
    if (op != Py_EQ && op != Py_NE)
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *mine = PySequence_List(self);
    PyObject *theirs = other;
    if (Py_TYPE(other) == &Links_Type)
        theirs = PySequence_List(other);
    else
        Py_INCREF(other);
    PyObject *result = mine == NULL || theirs == NULL ? NULL : PyObject_RichCompare(mine, theirs, op);
    Py_XDECREF(mine);
    Py_XDECREF(theirs);
    return result;
}

static PyObject *
Links_repr(PyObject *self)
{
    PyObject *list = PySequence_List(self);
    if (list == NULL)
        return NULL;
    PyObject *repr = PyUnicode_FromFormat("Links(%R)", list);
    Py_DECREF(list);
    return repr;
}

static PyObject *
Links_append(Links *self, PyObject *link)
{
    if (!PyTuple_Check(link) || PyTuple_GET_SIZE(link) != 3 || !PyLong_Check(PyTuple_GET_ITEM(link, 0))
        || !PyLong_Check(PyTuple_GET_ITEM(link, 1)) || !PyTuple_Check(PyTuple_GET_ITEM(link, 2))) {
        PyErr_SetString(PyExc_TypeError, "a link is (source index, target index, rest tuple)");
        return NULL;
    }
    Py_ssize_t source = PyLong_AsSsize_t(PyTuple_GET_ITEM(link, 0));
    Py_ssize_t target = PyLong_AsSsize_t(PyTuple_GET_ITEM(link, 1));
    if ((source == -1 || target == -1) && PyErr_Occurred())
        return NULL;
    if (source < 0 || target < 0) {
        PyErr_SetString(PyExc_ValueError, "a link's node indices cannot be negative");
        return NULL;
    }
    if (links_push(self, source, target, PyTuple_GET_ITEM(link, 2)) < 0)
        return NULL;
    Py_RETURN_NONE;
}

/* An iterator over a Links: its link tuples in order. */
typedef struct {
    PyObject_HEAD
    Links *links; /* NULL once done */
    Py_ssize_t next;
} LinksIterator;

static PyTypeObject LinksIterator_Type;

static PyObject *
Links_iter(Links *self)
{
    LinksIterator *iterator = PyObject_New(LinksIterator, &LinksIterator_Type);
    if (iterator == NULL)
        return NULL;
    Py_INCREF(self);
    iterator->links = self;
    iterator->next = 0;
    return (PyObject *)iterator;
}

static void
LinksIterator_dealloc(LinksIterator *self)
{
    Py_XDECREF(self->links);
    PyObject_Free(self);
}

static PyObject *
LinksIterator_next(LinksIterator *self)
{
    if (self->links == NULL)
        return NULL;
    if (self->next >= self->links->count) {
        Py_CLEAR(self->links);
        return NULL; /* StopIteration, set by the caller */
    }
    return links_tuple(self->links, self->next++);
}

static PyTypeObject LinksIterator_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "graphviz_autograd._speedups.LinksIterator",
    .tp_basicsize = sizeof(LinksIterator),
    .tp_dealloc = (destructor)LinksIterator_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_iter = PyObject_SelfIter,
    .tp_iternext = (iternextfunc)LinksIterator_next,
};

static PyObject *
Links_reduce(PyObject *self, PyObject *unused)
{
    PyObject *list = PySequence_List(self);
    return list == NULL ? NULL : Py_BuildValue("(O(N))", (PyObject *)&PyList_Type, list);
}

static PyMethodDef Links_methods[] = {
    {"append", (PyCFunction)Links_append, METH_O, "Add a (source index, target index, rest tuple) link."},
    {"__reduce__", Links_reduce, METH_NOARGS, "Pickled and copied as a list of link tuples."},
    {NULL, NULL, 0, NULL},
};

static PySequenceMethods Links_as_sequence = {
    .sq_length = (lenfunc)Links_length,
    .sq_item = (ssizeargfunc)Links_item,
};

static PyMappingMethods Links_as_mapping = {
    .mp_length = (lenfunc)Links_length,
    .mp_subscript = (binaryfunc)Links_subscript,
};

PyDoc_STRVAR(Links_doc,
"Links()\n"
"--\n\n"
"A walk's edges as graph.Columns.links: (source index, target index, Edge[2:])\n"
"each, read as tuples, kept without one. Compares equal to a list of the same\n"
"tuples, and pickles as one.");

static PyTypeObject Links_Type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "graphviz_autograd._speedups.Links",
    .tp_basicsize = sizeof(Links),
    .tp_dealloc = (destructor)Links_dealloc,
    .tp_repr = Links_repr,
    .tp_as_sequence = &Links_as_sequence,
    .tp_as_mapping = &Links_as_mapping,
    .tp_hash = PyObject_HashNotImplemented,
#ifdef Py_TPFLAGS_SEQUENCE
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_SEQUENCE, /* a sequence to match statements too */
#else
    .tp_flags = Py_TPFLAGS_DEFAULT,
#endif
    .tp_doc = Links_doc,
    .tp_richcompare = Links_richcompare,
    .tp_iter = (getiterfunc)Links_iter,
    .tp_methods = Links_methods,
    .tp_new = Links_new,
};

/* Link k of ``links``, a list of (source, target, rest) tuples or a Links: its node
 * indices and its rest (borrowed). -1 with an exception set when k is out of range
 * or the link is not such a tuple. */
static int
link_at(PyObject *links, Py_ssize_t k, Py_ssize_t *source, Py_ssize_t *target, PyObject **rest)
{
    if (Py_TYPE(links) == &Links_Type) {
        Links *l = (Links *)links;
        if (k >= l->count) {
            PyErr_SetString(PyExc_RuntimeError, "the links changed while they were read");
            return -1;
        }
        *source = l->ends[2 * k];
        *target = l->ends[2 * k + 1];
        *rest = l->rests[k];
        return 0;
    }
    if (k >= PyList_GET_SIZE(links)) {
        PyErr_SetString(PyExc_RuntimeError, "the links changed while they were read");
        return -1;
    }
    PyObject *link = PyList_GET_ITEM(links, k);
    if (!PyTuple_Check(link) || PyTuple_GET_SIZE(link) != 3) {
        PyErr_SetString(PyExc_TypeError, "a link is not (source, target, rest)");
        return -1;
    }
    *source = PyLong_AsSsize_t(PyTuple_GET_ITEM(link, 0));
    *target = PyLong_AsSsize_t(PyTuple_GET_ITEM(link, 1));
    if ((*source == -1 || *target == -1) && PyErr_Occurred())
        return -1;
    *rest = PyTuple_GET_ITEM(link, 2);
    return 0;
}

/* How many links ``links`` holds: a list of link tuples or a Links; -1 with TypeError for anything else. */
static Py_ssize_t
link_count(PyObject *links)
{
    if (Py_TYPE(links) == &Links_Type)
        return ((Links *)links)->count;
    if (PyList_Check(links))
        return PyList_GET_SIZE(links);
    PyErr_SetString(PyExc_TypeError, "links must be a list or a Links");
    return -1;
}

/* The node index of each grad_fn on drain's stack, in step with it, so that a node
 * popped needs no look-up in fn_index. Owns a reference to each index. */
typedef struct {
    PyObject **items;
    Py_ssize_t count, capacity;
} Indices;

static int
indices_push(Indices *indices, PyObject *index)
{
    if (indices->count == indices->capacity) {
        Py_ssize_t capacity = indices->capacity ? 2 * indices->capacity : 64;
        PyObject **items = resized(indices->items, capacity, sizeof(PyObject *));
        if (items == NULL)
            return -1;
        indices->items = items;
        indices->capacity = capacity;
    }
    Py_INCREF(index);
    indices->items[indices->count++] = index;
    return 0;
}

static void
indices_free(Indices *indices)
{
    for (Py_ssize_t k = 0; k < indices->count; k++)
        Py_DECREF(indices->items[k]);
    PyMem_Free(indices->items);
}

/* The inputs of node ``at``: an index and a link each, new grad_fns pushed on the
 * stack and their indices on ``indices`` (first input on top). Returns -1 with an
 * exception set on failure. */
static int
visit_inputs(PyObject *fn, Py_ssize_t at, PyObject *stack, Indices *indices, PyObject *fn_index,
             PyObject *contents, Links *links, PyObject *data_link,
             PyObject *cut_link, PyObject *plain_cut)
{
    PyObject *inputs = PyObject_GetAttr(fn, str_next_functions);
    if (inputs == NULL)
        return -1;
    PyObject *seq = PySequence_Fast(inputs, "next_functions is not a sequence");
    Py_DECREF(inputs);
    if (seq == NULL)
        return -1;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    Py_ssize_t new_children = 0;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *pair = items[k];
        if (!PyTuple_Check(pair) || PyTuple_GET_SIZE(pair) != 2) {
            PyErr_SetString(PyExc_TypeError, "next_functions holds an entry that is not a (function, input number) pair");
            goto fail;
        }
        PyObject *child = PyTuple_GET_ITEM(pair, 0);
        if (child == Py_None) {
            if (links_push(links, PyList_GET_SIZE(contents), at, cut_link) < 0
                || PyList_Append(contents, plain_cut) < 0)
                goto fail;
            continue;
        }
        PyObject *child_index = PyDict_GetItemWithError(fn_index, child); /* borrowed */
        if (child_index != NULL) {
            Py_ssize_t child_at = PyLong_AsSsize_t(child_index);
            if ((child_at == -1 && PyErr_Occurred()) || links_push(links, child_at, at, data_link) < 0)
                goto fail;
            continue;
        }
        if (PyErr_Occurred())
            goto fail;
        Py_ssize_t new_at = PyList_GET_SIZE(contents);
        PyObject *new_index = PyLong_FromSsize_t(new_at);
        if (new_index == NULL)
            goto fail;
        if (PyDict_SetItem(fn_index, child, new_index) < 0
            || PyList_Append(contents, Py_None) < 0
            || PyList_Append(stack, child) < 0
            || indices_push(indices, new_index) < 0
            || links_push(links, new_at, at, data_link) < 0) {
            Py_DECREF(new_index);
            goto fail;
        }
        Py_DECREF(new_index);
        new_children++;
    }
    /* The run of new children, reversed: the first input is walked first. */
    if (new_children > 1) {
        PyObject **top = &PyList_GET_ITEM(stack, PyList_GET_SIZE(stack) - new_children);
        PyObject **top_indices = indices->items + indices->count - new_children;
        for (Py_ssize_t lo = 0, hi = new_children - 1; lo < hi; lo++, hi--) {
            PyObject *swap = top[lo];
            top[lo] = top[hi];
            top[hi] = swap;
            swap = top_indices[lo];
            top_indices[lo] = top_indices[hi];
            top_indices[hi] = swap;
        }
    }
    Py_DECREF(seq);
    return 0;
fail:
    Py_DECREF(seq);
    return -1;
}

/* What drain needs to add the leaf behind an AccumulateGrad itself (see
 * _Walker.accumulate_grad and _Walker.leaf, which it does the work of). */
typedef struct {
    PyObject *leaf_index;      /* dict: id(leaf tensor) -> node index */
    PyObject *keep_alive;      /* list: the leaves, kept while their ids are keys */
    PyObject *parameter_names; /* dict: id(tensor) -> name */
    PyObject *dtype_names;     /* dict: torch.dtype -> its name, filled by meta_of */
    PyObject *device_names;    /* dict: torch.device -> its name, filled by meta_of */
    PyObject *meta_of;         /* tensor -> (shape, dtype name, device name), in Python */
    PyObject *accumulate_content; /* the content every AccumulateGrad node shares */
    PyObject *leaf_kind;
    PyObject *parameter_kind;
} Leaves;

/* (shape, dtype name, device name) of a tensor, read the way walk._tensor_meta
 * reads them; anything out of the ordinary is left to meta_of. */
static PyObject *
tensor_meta(Leaves *leaves, PyObject *tensor)
{
    PyObject *shape = NULL, *size = NULL, *dtype = NULL, *device = NULL;
    PyObject *dtype_name, *device_name;
    size = PyObject_GetAttr(tensor, str_shape);
    if (size == NULL || !PyTuple_Check(size))
        goto in_python;
    shape = PyTuple_GetSlice(size, 0, PyTuple_GET_SIZE(size)); /* torch.Size -> tuple */
    if (shape == NULL)
        goto in_python;
    for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(shape); k++) {
        if (!PyLong_CheckExact(PyTuple_GET_ITEM(shape, k)))
            goto in_python;
    }
    dtype = PyObject_GetAttr(tensor, str_dtype);
    if (dtype == NULL || (dtype_name = PyDict_GetItemWithError(leaves->dtype_names, dtype)) == NULL)
        goto in_python;
    device = PyObject_GetAttr(tensor, str_device);
    if (device == NULL || (device_name = PyDict_GetItemWithError(leaves->device_names, device)) == NULL)
        goto in_python;
    PyObject *meta = PyTuple_Pack(3, shape, dtype_name, device_name);
    Py_DECREF(size);
    Py_DECREF(shape);
    Py_DECREF(dtype);
    Py_DECREF(device);
    return meta;
in_python:
    Py_XDECREF(size);
    Py_XDECREF(shape);
    Py_XDECREF(dtype);
    Py_XDECREF(device);
    PyErr_Clear();
    return PyObject_CallOneArg(leaves->meta_of, tensor);
}

/* The index of the node of a leaf tensor, adding the node the first time (new reference). */
static PyObject *
leaf_node(Leaves *leaves, PyObject *tensor, PyObject *contents)
{
    PyObject *key = PyLong_FromVoidPtr(tensor);
    if (key == NULL)
        return NULL;
    PyObject *index = PyDict_GetItemWithError(leaves->leaf_index, key);
    if (index != NULL || PyErr_Occurred()) {
        Py_XINCREF(index);
        Py_DECREF(key);
        return index;
    }
    PyObject *meta = NULL, *content = NULL;
    index = PyLong_FromSsize_t(PyList_GET_SIZE(contents));
    if (index == NULL)
        goto fail;
    PyObject *name = PyDict_GetItemWithError(leaves->parameter_names, key); /* borrowed */
    if (name == NULL && PyErr_Occurred())
        goto fail;
    meta = tensor_meta(leaves, tensor);
    if (meta == NULL)
        goto fail;
    if (!PyTuple_Check(meta) || PyTuple_GET_SIZE(meta) != 3) {
        PyErr_SetString(PyExc_TypeError, "meta_of() must give (shape, dtype, device)");
        goto fail;
    }
    /* (kind, name, shape, dtype, device, attrs, note, module), as _Walker.leaf makes it */
    content = PyTuple_Pack(8, name == NULL ? leaves->leaf_kind : leaves->parameter_kind,
                           name == NULL ? str_empty : name, PyTuple_GET_ITEM(meta, 0),
                           PyTuple_GET_ITEM(meta, 1), PyTuple_GET_ITEM(meta, 2), empty_tuple, str_empty, str_empty);
    if (content != NULL) {
        untrack_if_atomic(PyTuple_GET_ITEM(meta, 0)); /* the shape */
        untrack_if_atomic(content);
    }
    if (content == NULL
        || PyDict_SetItem(leaves->leaf_index, key, index) < 0
        || PyList_Append(leaves->keep_alive, tensor) < 0
        || PyList_Append(contents, content) < 0)
        goto fail;
    Py_DECREF(key);
    Py_DECREF(meta);
    Py_DECREF(content);
    return index;
fail:
    Py_DECREF(key);
    Py_XDECREF(index);
    Py_XDECREF(meta);
    Py_XDECREF(content);
    return NULL;
}

/* An AccumulateGrad node at ``at``: its shared content, its leaf and the link between. */
static int
accumulate_grad(Leaves *leaves, PyObject *fn, Py_ssize_t at, PyObject *contents, Links *links,
                PyObject *data_link)
{
    PyObject *tensor = PyObject_GetAttr(fn, str_variable);
    if (tensor == NULL)
        return -1;
    PyObject *leaf = leaf_node(leaves, tensor, contents);
    Py_DECREF(tensor);
    if (leaf == NULL)
        return -1;
    Py_ssize_t leaf_at = PyLong_AsSsize_t(leaf);
    Py_DECREF(leaf);
    if (leaf_at == -1 && PyErr_Occurred())
        return -1;
    Py_INCREF(leaves->accumulate_content);
    if (PyList_SetItem(contents, at, leaves->accumulate_content) < 0) /* steals */
        return -1;
    return links_push(links, leaf_at, at, data_link);
}

PyDoc_STRVAR(drain_doc,
"drain(walker, stack, fn_index, contents, links, plain_ops, feeds_leaf, data_link, cut_link, plain_cut, leaves)\n"
"--\n\n"
"_Walker.drain for a walk without a recorder and without edge shapes:\n"
"the same graph, built the same way, its links in a Links. ``leaves`` is (leaf_index, keep_alive,\n"
"parameter_names, dtype_names, device_names, meta_of, accumulate_content,\n"
"leaf_kind, parameter_kind): what an AccumulateGrad of a type in plain_ops\n"
"(as feeds_leaf) needs to add its leaf.");

static PyObject *
drain(PyObject *module, PyObject *args)
{
    PyObject *walker, *stack, *fn_index, *contents, *plain_ops;
    PyObject *feeds_leaf, *data_link, *cut_link, *plain_cut;
    Links *links;
    Leaves leaves;
    if (!PyArg_ParseTuple(args, "OO!O!O!O!O!OOOO(O!O!O!O!O!OOOO):drain", &walker, &PyList_Type, &stack,
                          &PyDict_Type, &fn_index, &PyList_Type, &contents, &Links_Type, &links,
                          &PyDict_Type, &plain_ops, &feeds_leaf, &data_link, &cut_link, &plain_cut,
                          &PyDict_Type, &leaves.leaf_index, &PyList_Type, &leaves.keep_alive,
                          &PyDict_Type, &leaves.parameter_names, &PyDict_Type, &leaves.dtype_names,
                          &PyDict_Type, &leaves.device_names, &leaves.meta_of, &leaves.accumulate_content,
                          &leaves.leaf_kind, &leaves.parameter_kind))
        return NULL;
    Indices indices = {NULL, 0, 0};
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(stack); k++) {
        PyObject *index = PyDict_GetItemWithError(fn_index, PyList_GET_ITEM(stack, k));
        if (index == NULL) {
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_KeyError, "a grad_fn on the stack has no index");
            indices_free(&indices);
            return NULL;
        }
        if (indices_push(&indices, index) < 0) {
            indices_free(&indices);
            return NULL;
        }
    }
    Py_INCREF(plain_cut);
    for (Py_ssize_t step = 1; PyList_GET_SIZE(stack) > 0; step++) {
        if (interrupted(step))
            goto error;
        if (PyList_GET_SIZE(stack) != indices.count) {
            PyErr_SetString(PyExc_RuntimeError, "the walk's stack was changed while it ran");
            goto error;
        }
        /* list.pop() without the call: the stack's reference becomes ours, as does
         * that of its index. */
        Py_ssize_t top = PyList_GET_SIZE(stack) - 1;
        PyObject *fn = PyList_GET_ITEM(stack, top);
        Py_SET_SIZE(stack, top);
        PyObject *index = indices.items[--indices.count];
        Py_ssize_t at = PyLong_AsSsize_t(index);
        if (at == -1 && PyErr_Occurred())
            goto error_fn;
        PyObject *content = PyDict_GetItemWithError(plain_ops, (PyObject *)Py_TYPE(fn));
        if (content == NULL && PyErr_Occurred())
            goto error_fn;
        if (content == NULL) {
            PyObject *noted = PyObject_CallMethodObjArgs(walker, str_content_of, fn, index, NULL);
            if (noted == NULL)
                goto error_fn;
            if (noted == Py_None) { /* an AccumulateGrad, done */
                Py_DECREF(noted);
                Py_DECREF(fn);
                Py_DECREF(index);
                continue;
            }
            if (!PyTuple_Check(noted) || PyTuple_GET_SIZE(noted) != 4
                || PyObject_IsTrue(PyTuple_GET_ITEM(noted, 2)) != 0) {
                Py_DECREF(noted);
                PyErr_SetString(PyExc_RuntimeError, "content_of() gave what only a walk with a recorder can: walk it in Python");
                goto error_fn;
            }
            content = PyTuple_GET_ITEM(noted, 0);
            Py_INCREF(content);
            Py_INCREF(PyTuple_GET_ITEM(noted, 3));
            Py_SETREF(plain_cut, PyTuple_GET_ITEM(noted, 3));
            Py_DECREF(noted);
        }
        else if (content == feeds_leaf) {
            int failed = accumulate_grad(&leaves, fn, at, contents, links, data_link);
            Py_DECREF(fn);
            Py_DECREF(index);
            if (failed)
                goto error;
            continue;
        }
        else {
            Py_INCREF(content);
        }
        if (PyList_SetItem(contents, at, content) < 0) /* steals content */
            goto error_fn;
        if (visit_inputs(fn, at, stack, &indices, fn_index, contents, links, data_link, cut_link, plain_cut) < 0)
            goto error_fn;
        Py_DECREF(fn);
        Py_DECREF(index);
        continue;
    error_fn:
        Py_DECREF(fn);
        Py_DECREF(index);
        goto error;
    }
    Py_DECREF(plain_cut);
    indices_free(&indices);
    Py_RETURN_NONE;
error:
    Py_DECREF(plain_cut);
    indices_free(&indices);
    return NULL;
}

/* 0 for a str, -1 with TypeError set for anything else written as DOT text. */
static inline int
check_text(PyObject *text)
{
    if (PyUnicode_Check(text))
        return 0;
    PyErr_Format(PyExc_TypeError, "a piece of DOT text is a %.100s, not a str", Py_TYPE(text)->tp_name);
    return -1;
}

/* What dot_text and add_line need to know of a str before they write it: its length,
 * widening the widest character seen. -1 with an exception set when it is not a str. */
static Py_ssize_t
measure(PyObject *text, Py_UCS4 *widest)
{
    if (check_text(text) < 0)
        return -1;
    Py_UCS4 most = PyUnicode_MAX_CHAR_VALUE(text);
    if (most > *widest)
        *widest = most;
    return PyUnicode_GET_LENGTH(text);
}

/* The str dot_text or add_line writes into, and where it stands. Every write checks that it
 * fits: the sizes were measured in a pass before, and a graph changed in between
 * (by another thread, say) must give an error, never a write past the end. */
typedef struct {
    PyObject *text;
    int kind;
    void *data;
    Py_ssize_t at, size;
} Out;

static inline int
room(Out *out, Py_ssize_t length)
{
    if (out->at + length <= out->size)
        return 0;
    PyErr_SetString(PyExc_RuntimeError, "the DOT text outgrew its measure: was the graph changed while it was written?");
    return -1;
}

static inline int
put(Out *out, PyObject *text)
{
    if (check_text(text) < 0)
        return -1;
    Py_ssize_t length = PyUnicode_GET_LENGTH(text);
    if (room(out, length) < 0)
        return -1;
    if (PyUnicode_KIND(text) == out->kind)
        memcpy((char *)out->data + out->at * out->kind, PyUnicode_DATA(text), length * out->kind);
    else if (PyUnicode_CopyCharacters(out->text, out->at, text, 0, length) < 0)
        return -1;
    out->at += length;
    return 0;
}

static inline int
put_ascii(Out *out, const char *text, Py_ssize_t length)
{
    if (room(out, length) < 0)
        return -1;
    if (out->kind == PyUnicode_1BYTE_KIND) {
        memcpy((char *)out->data + out->at, text, length);
    }
    else {
        for (Py_ssize_t k = 0; k < length; k++)
            PyUnicode_WRITE(out->kind, out->data, out->at + k, (Py_UCS4)(unsigned char)text[k]);
    }
    out->at += length;
    return 0;
}

/* The length of the str pieces of ``list`` together, widening the widest character
 * seen; -1 with an exception set when one is not a str. */
static Py_ssize_t
measure_list(PyObject *list, Py_UCS4 *widest)
{
    Py_ssize_t total = 0, length;
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(list); k++) {
        if ((length = measure(PyList_GET_ITEM(list, k), widest)) < 0)
            return -1;
        total += length;
    }
    return total;
}

static int
put_list(Out *out, PyObject *list)
{
    for (Py_ssize_t k = 0; k < PyList_GET_SIZE(list); k++) {
        if (put(out, PyList_GET_ITEM(list, k)) < 0)
            return -1;
    }
    return 0;
}

/* One str made of ``count`` str pieces (new reference). NULL with an exception set on failure. */
static PyObject *
joined(PyObject **pieces, int count)
{
    Py_ssize_t total = 0, length;
    Py_UCS4 widest = 0;
    for (int k = 0; k < count; k++) {
        if ((length = measure(pieces[k], &widest)) < 0)
            return NULL;
        total += length;
    }
    PyObject *text = PyUnicode_New(total, widest);
    if (text == NULL)
        return NULL;
    Out out = {text, PyUnicode_KIND(text), PyUnicode_DATA(text), 0, total};
    for (int k = 0; k < count; k++) {
        if (put(&out, pieces[k]) < 0) {
            Py_DECREF(text);
            return NULL;
        }
    }
    return text;
}

/* Appends to ``lines`` one str made of ``count`` str pieces. -1 with an exception set on failure. */
static int
add_line(PyObject *lines, PyObject **pieces, int count)
{
    PyObject *line = joined(pieces, count);
    if (line == NULL)
        return -1;
    int failed = PyList_Append(lines, line);
    Py_DECREF(line);
    return failed;
}

/* Where a node's attributes come from when they were not met in this drawing
 * (dot._Writer): ``lookup`` as node_text and dot_text take it. */
typedef struct {
    PyObject *written;     /* dict: content -> attributes, kept between drawings */
    PyObject *miss;        /* index -> attributes, in Python */
    PyObject *named_parts; /* dict: (kind, *content[3:]) -> pieces (dot._Writer.named_tensor_pieces) */
    Py_ssize_t max_chars;  /* a longer name is cut for the label (_Writer.cut_name) */
    Py_ssize_t written_kept; /* written is emptied when it holds this many */
} Lookup;

static int
read_lookup(PyObject *tuple, Lookup *lookup)
{
    return PyArg_ParseTuple(tuple, "O!OO!nn;lookup must be (written, miss, named_parts, max_chars, written_kept)",
                            &PyDict_Type, &lookup->written, &lookup->miss, &PyDict_Type, &lookup->named_parts,
                            &lookup->max_chars, &lookup->written_kept);
}

/* Whether a name goes into a DOT string as it is: ASCII with nothing for escape() to
 * change (dot._NEEDS_ESCAPE). */
static int
plain_name(PyObject *name)
{
    if (!PyUnicode_CheckExact(name) || !PyUnicode_IS_ASCII(name))
        return 0;
    Py_ssize_t length = PyUnicode_GET_LENGTH(name);
    if (length == 0)
        return 0;
    const Py_UCS1 *chars = PyUnicode_1BYTE_DATA(name);
    for (Py_ssize_t k = 0; k < length; k++) {
        Py_UCS1 c = chars[k];
        if (c < 0x20 || c == 0x7f || c == '\\' || c == '"' || c == '&')
            return 0;
    }
    return 1;
}

/* shape_text() of a tuple of ints, "(2, 3)" (a new str). NULL without an exception
 * for a shape of anything else (left to Python), with one when out of memory. */
static PyObject *
shape_text(PyObject *shape)
{
    if (!PyTuple_CheckExact(shape))
        return NULL;
    Py_ssize_t dims = PyTuple_GET_SIZE(shape);
    size_t room = 3 + (size_t)dims * 24; /* "(", ")", NUL; ", " and up to 20 digits and a sign each */
    char *text = PyMem_Malloc(room);
    if (text == NULL)
        return PyErr_NoMemory();
    size_t at = 0;
    text[at++] = '(';
    for (Py_ssize_t k = 0; k < dims; k++) {
        PyObject *size = PyTuple_GET_ITEM(shape, k);
        long long value;
        if (!PyLong_CheckExact(size) || ((value = PyLong_AsLongLong(size)) == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            PyMem_Free(text);
            return NULL;
        }
        at += (size_t)snprintf(text + at, room - at, k ? ", %lld" : "%lld", value);
    }
    text[at++] = ')';
    PyObject *written = PyUnicode_FromStringAndSize(text, (Py_ssize_t)at);
    PyMem_Free(text);
    return written;
}

/* _Writer.cut_name of an ASCII name: past max_chars, "..." and its end (a new str). */
static PyObject *
cut_name(PyObject *name, Py_ssize_t max_chars)
{
    Py_ssize_t length = PyUnicode_GET_LENGTH(name);
    if (length <= max_chars)
        return Py_NewRef(name);
    return PyUnicode_FromFormat("...%s", (const char *)PyUnicode_1BYTE_DATA(name) + length - (max_chars - 3));
}

/* What a piece of dot._Writer.named_tensor_pieces is: text, or where the name, the
 * shape's text or the name as the label shows it goes (dot.NAME_SLOT, dot.SHAPE_SLOT,
 * dot.SHOWN_NAME_SLOT); -1 for anything else. */
enum { NAME_SLOT = 0, SHAPE_SLOT = 1, SHOWN_NAME_SLOT = 2, TEXT_PIECE = 3 };

static int
piece_slot(PyObject *piece)
{
    if (PyUnicode_CheckExact(piece))
        return TEXT_PIECE;
    if (!PyLong_CheckExact(piece))
        return -1;
    int overflow;
    long slot = PyLong_AsLongAndOverflow(piece, &overflow);
    return !overflow && (slot == NAME_SLOT || slot == SHAPE_SLOT || slot == SHOWN_NAME_SLOT) ? (int)slot : -1;
}

/* _Writer.named_tensor_attrs where its pieces were written for an earlier node of the
 * drawing: each text piece, with the name, the shape's text and the name as cut for
 * the label at their slots. NULL without an exception where they were not, or the
 * node needs more (then Python writes it). */
static PyObject *
named_tensor_attrs(Lookup *lookup, PyObject *content)
{
    if (PyDict_GET_SIZE(lookup->named_parts) == 0 || !PyTuple_CheckExact(content) || PyTuple_GET_SIZE(content) < 3)
        return NULL;
    PyObject *name = PyTuple_GET_ITEM(content, 1);
    if (lookup->max_chars < 4 || !plain_name(name))
        return NULL;
    Py_ssize_t size = PyTuple_GET_SIZE(content);
    PyObject *key = PyTuple_New(size - 2); /* the content less its name and shape */
    if (key == NULL)
        return NULL;
    for (Py_ssize_t k = 0, at = 0; k < size; k++) {
        if (k == 1 || k == 2)
            continue;
        Py_INCREF(PyTuple_GET_ITEM(content, k));
        PyTuple_SET_ITEM(key, at++, PyTuple_GET_ITEM(content, k));
    }
    PyObject *pieces = PyDict_GetItemWithError(lookup->named_parts, key);
    Py_DECREF(key);
    if (pieces == NULL) {
        if (PyErr_Occurred() && PyErr_ExceptionMatches(PyExc_TypeError))
            PyErr_Clear(); /* a content that cannot be a key is Python's too */
        return NULL;
    }
    if (!PyTuple_CheckExact(pieces) || PyTuple_GET_SIZE(pieces) == 0 || PyTuple_GET_SIZE(pieces) > INT_MAX)
        return NULL;
    Py_INCREF(pieces); /* read while the text is made */
    PyObject *attrs = NULL, *shown = NULL, *shape = shape_text(PyTuple_GET_ITEM(content, 2));
    Py_ssize_t count = PyTuple_GET_SIZE(pieces);
    PyObject **items = PyMem_Malloc(count * sizeof(PyObject *));
    if (items == NULL)
        PyErr_NoMemory();
    if (items == NULL || shape == NULL || (shown = cut_name(name, lookup->max_chars)) == NULL)
        goto done;
    for (Py_ssize_t k = 0; k < count; k++) {
        PyObject *piece = PyTuple_GET_ITEM(pieces, k);
        switch (piece_slot(piece)) {
        case TEXT_PIECE: items[k] = piece; break;
        case NAME_SLOT: items[k] = name; break;
        case SHAPE_SLOT: items[k] = shape; break;
        case SHOWN_NAME_SLOT: items[k] = shown; break;
        default: goto done; /* not pieces as named_tensor_pieces writes them: Python's */
        }
    }
    attrs = joined(items, (int)count);
done:
    PyMem_Free(items);
    Py_XDECREF(shape);
    Py_XDECREF(shown);
    Py_DECREF(pieces);
    return attrs;
}

/* dot._keep: written[content] = attrs, emptied first when full. */
static int
keep(Lookup *lookup, PyObject *content, PyObject *attrs)
{
    if (PyDict_GET_SIZE(lookup->written) >= lookup->written_kept)
        PyDict_Clear(lookup->written);
    return PyDict_SetItem(lookup->written, content, attrs);
}

/* The attributes of node i, whose content was not met before in this drawing:
 * written[content], else the named tensor's parts put together (then kept in
 * written), else miss(i). A new reference. */
static PyObject *
new_content_attrs(Lookup *lookup, PyObject *contents, Py_ssize_t i)
{
    PyObject *content = PyList_GET_ITEM(contents, i);
    if (PyTuple_CheckExact(content)) {
        /* Held at once: another thread drawing may empty ``written`` (dot._keep). */
        PyObject *attrs = PyDict_GetItemWithError(lookup->written, content);
        if (attrs != NULL)
            return Py_NewRef(attrs);
        if (PyErr_Occurred()) {
            if (!PyErr_ExceptionMatches(PyExc_TypeError))
                return NULL;
            PyErr_Clear(); /* a content that cannot be hashed: left to miss() */
        }
        else if ((attrs = named_tensor_attrs(lookup, content)) != NULL) {
            if (keep(lookup, content, attrs) < 0)
                Py_CLEAR(attrs);
            return attrs;
        }
        else if (PyErr_Occurred()) {
            return NULL;
        }
    }
    PyObject *at = PyLong_FromSsize_t(i);
    if (at == NULL)
        return NULL;
    PyObject *attrs = PyObject_CallOneArg(lookup->miss, at);
    Py_DECREF(at);
    return attrs;
}

/* dot_text's contents met in one drawing, by address: most nodes share a content with
 * others, and are found here without a key object or a dict. Holds a reference to
 * each content, so that an address stays its own while the table lives. */
typedef struct {
    PyObject *content;
    PyObject *attrs;
} Met;

typedef struct {
    Met *slots;
    size_t mask; /* capacity - 1, a power of two */
    size_t count;
} MetTable;

static inline size_t
met_slot(const MetTable *table, PyObject *content)
{
    uint64_t h = ((uint64_t)(uintptr_t)content >> 4) * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 32) & table->mask;
}

static int
met_init(MetTable *table)
{
    table->mask = 63;
    table->count = 0;
    table->slots = PyMem_Calloc(table->mask + 1, sizeof(Met));
    if (table->slots == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static void
met_free(MetTable *table)
{
    if (table->slots == NULL)
        return;
    for (size_t k = 0; k <= table->mask; k++) {
        Py_XDECREF(table->slots[k].content);
        Py_XDECREF(table->slots[k].attrs);
    }
    PyMem_Free(table->slots);
    table->slots = NULL;
}

/* The slot where ``content``, not in the table, goes. */
static size_t
met_empty_slot(const MetTable *table, PyObject *content)
{
    size_t at = met_slot(table, content);
    while (table->slots[at].content != NULL)
        at = (at + 1) & table->mask;
    return at;
}

static PyObject *
met_get(const MetTable *table, PyObject *content) /* borrowed, or NULL */
{
    for (size_t k = met_slot(table, content);; k = (k + 1) & table->mask) {
        if (table->slots[k].content == content)
            return table->slots[k].attrs;
        if (table->slots[k].content == NULL)
            return NULL;
    }
}

/* Adds content -> attrs (not in the table yet), taking new references to both. */
static int
met_add(MetTable *table, PyObject *content, PyObject *attrs)
{
    if (2 * (table->count + 1) > table->mask + 1) { /* kept at most half full */
        MetTable bigger = {NULL, 2 * table->mask + 1, 0};
        bigger.slots = PyMem_Calloc(bigger.mask + 1, sizeof(Met));
        if (bigger.slots == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        for (size_t k = 0; k <= table->mask; k++) {
            Met met = table->slots[k];
            if (met.content == NULL)
                continue;
            bigger.slots[met_empty_slot(&bigger, met.content)] = met;
            bigger.count++;
        }
        PyMem_Free(table->slots);
        *table = bigger;
    }
    size_t at = met_empty_slot(table, content);
    table->slots[at].content = Py_NewRef(content);
    table->slots[at].attrs = Py_NewRef(attrs);
    table->count++;
    return 0;
}

/* The attributes of node i in one drawing: those of its content when ``met`` before in
 * the drawing, else new_content_attrs (then added to ``met``). A new reference. */
static PyObject *
drawn_attrs(Lookup *lookup, MetTable *met, PyObject *contents, Py_ssize_t i)
{
    PyObject *content = PyList_GET_ITEM(contents, i);
    PyObject *found = met_get(met, content);
    if (found != NULL)
        return Py_NewRef(found);
    Py_INCREF(content); /* miss() may drop it from the list */
    PyObject *attrs = new_content_attrs(lookup, contents, i);
    if (attrs != NULL && met_add(met, content, attrs) < 0)
        Py_CLEAR(attrs);
    Py_DECREF(content);
    return attrs;
}

PyDoc_STRVAR(node_text_doc,
"node_text(ids, contents, start, stop, lookup)\n"
"--\n\n"
"The lines of nodes start..stop-1, a str each: '\\t<id> <attributes>\\n'.\n"
"``lookup`` is (written, miss, named_parts, max_chars, written_kept). A node's\n"
"attributes are those of a node met before in the call with the same content\n"
"(by address), else written[content], else a named tensor's\n"
"pieces named_parts[(kind, *content[3:])] with its name (cut past max_chars for\n"
"the label) and shape's text put in, for an ASCII name with nothing to escape\n"
"(then kept in written), else miss(index).");

static PyObject *
node_text(PyObject *module, PyObject *args)
{
    PyObject *ids, *contents, *lookup_tuple, *lines;
    Py_ssize_t start, stop;
    Lookup lookup;
    MetTable met;
    if (!PyArg_ParseTuple(args, "O!O!nnO!:node_text", &PyList_Type, &ids, &PyList_Type, &contents,
                          &start, &stop, &PyTuple_Type, &lookup_tuple)
        || !read_lookup(lookup_tuple, &lookup))
        return NULL;
    if (start < 0)
        start = 0;
    if (met_init(&met) < 0)
        return NULL;
    if ((lines = PyList_New(0)) == NULL) {
        met_free(&met);
        return NULL;
    }
    /* Sizes read anew each time round: miss() runs Python code. */
    for (Py_ssize_t i = start; i < stop && i < PyList_GET_SIZE(contents); i++) {
        PyObject *attrs = drawn_attrs(&lookup, &met, contents, i);
        if (attrs == NULL)
            goto fail;
        if (i >= PyList_GET_SIZE(ids)) {
            Py_DECREF(attrs);
            PyErr_SetString(PyExc_IndexError, "a node has no id");
            goto fail;
        }
        PyObject *pieces[5] = {str_tab, PyList_GET_ITEM(ids, i), str_space, attrs, str_newline};
        int failed = add_line(lines, pieces, 5);
        Py_DECREF(attrs);
        if (failed)
            goto fail;
    }
    met_free(&met);
    return lines;
fail:
    met_free(&met);
    Py_DECREF(lines);
    return NULL;
}

/* The last edge rest (Edge[2:]) read_link looked up, and its line end: a walk gives
 * every data edge one rest tuple, and every cut edge another. Both borrowed from the
 * links (a list or a Links) and a dict that no Python code runs to change while links
 * are read. */
typedef struct {
    PyObject *rest;
    PyObject *end;
} LastEnd;

/* Link k's source and target indices (checked against ``id_count`` ids) and the end of
 * its line, line_ends[rest[0]] (borrowed). -1 with an exception set when it is not
 * (source, target, (kind, ...)) with both ends named and a known kind. */
static int
read_link(PyObject *links, Py_ssize_t k, Py_ssize_t id_count, PyObject *line_ends, LastEnd *last,
          Py_ssize_t *source, Py_ssize_t *target, PyObject **end)
{
    PyObject *rest;
    if (link_at(links, k, source, target, &rest) < 0)
        return -1;
    if (!PyTuple_Check(rest) || PyTuple_GET_SIZE(rest) < 1) {
        PyErr_SetString(PyExc_TypeError, "a link is not (source, target, (kind, ...))");
        return -1;
    }
    if (*source < 0 || *source >= id_count || *target < 0 || *target >= id_count) {
        PyErr_SetString(PyExc_IndexError, "a link names a node index with no id");
        return -1;
    }
    if (rest == last->rest) {
        *end = last->end;
        return 0;
    }
    PyObject *kind = PyTuple_GET_ITEM(rest, 0);
    *end = PyDict_GetItemWithError(line_ends, kind);
    if (*end == NULL) {
        if (!PyErr_Occurred())
            PyErr_SetObject(PyExc_KeyError, kind);
        return -1;
    }
    last->rest = rest;
    last->end = *end;
    return 0;
}

PyDoc_STRVAR(edge_text_doc,
"edge_text(ids, links, start, stop, line_ends)\n"
"--\n\n"
"The lines of links start..stop-1, a str each: '\\t<source> -> <target><end>',\n"
"where <end> is line_ends[rest[0]] (the edge's attributes and the line break).");

static PyObject *
edge_text(PyObject *module, PyObject *args)
{
    PyObject *ids, *links, *line_ends, *lines;
    Py_ssize_t start, stop;
    if (!PyArg_ParseTuple(args, "O!OnnO!:edge_text", &PyList_Type, &ids, &links,
                          &start, &stop, &PyDict_Type, &line_ends))
        return NULL;
    Py_ssize_t count = link_count(links);
    if (count < 0)
        return NULL;
    if (stop > count)
        stop = count;
    if (start < 0)
        start = 0;
    Py_ssize_t id_count = PyList_GET_SIZE(ids);
    LastEnd last = {NULL, NULL};
    if ((lines = PyList_New(0)) == NULL)
        return NULL;
    for (Py_ssize_t i = start; i < stop; i++) {
        Py_ssize_t source, target;
        PyObject *end;
        if (read_link(links, i, id_count, line_ends, &last, &source, &target, &end) < 0)
            goto fail;
        PyObject *pieces[5] = {str_tab, PyList_GET_ITEM(ids, source), str_arrow, PyList_GET_ITEM(ids, target), end};
        if (add_line(lines, pieces, 5) < 0)
            goto fail;
    }
    return lines;
fail:
    Py_DECREF(lines);
    return NULL;
}

PyDoc_STRVAR(shared_sources_doc,
"shared_sources(links, contents, kind, max_uses)\n"
"--\n\n"
"{node index: uses} of the nodes of ``kind`` that are the source of more than\n"
"``max_uses`` links (layout.split_shared_leaves).");

static PyObject *
shared_sources(PyObject *module, PyObject *args)
{
    PyObject *links, *contents, *kind;
    Py_ssize_t max_uses;
    if (!PyArg_ParseTuple(args, "OO!On:shared_sources", &links, &PyList_Type, &contents, &kind, &max_uses))
        return NULL;
    Py_ssize_t links_count = link_count(links);
    if (links_count < 0)
        return NULL;
    Py_ssize_t count = PyList_GET_SIZE(contents);
    Py_ssize_t *uses = PyMem_Calloc(count > 0 ? count : 1, sizeof(Py_ssize_t));
    if (uses == NULL)
        return PyErr_NoMemory();
    PyObject *shared = NULL;
    for (Py_ssize_t i = 0; i < links_count; i++) {
        Py_ssize_t source, target;
        PyObject *rest;
        if (link_at(links, i, &source, &target, &rest) < 0)
            goto done;
        if (source >= 0 && source < count)
            uses[source]++;
    }
    if ((shared = PyDict_New()) == NULL)
        goto done;
    for (Py_ssize_t i = 0; i < count && i < PyList_GET_SIZE(contents); i++) {
        if (uses[i] <= max_uses)
            continue;
        PyObject *content = PyList_GET_ITEM(contents, i);
        if (!PyTuple_Check(content) || PyTuple_GET_SIZE(content) < 1)
            continue;
        int same = PyObject_RichCompareBool(PyTuple_GET_ITEM(content, 0), kind, Py_EQ);
        if (same < 0)
            goto fail;
        if (!same)
            continue;
        PyObject *at = PyLong_FromSsize_t(i);
        PyObject *n = PyLong_FromSsize_t(uses[i]);
        int failed = at == NULL || n == NULL || PyDict_SetItem(shared, at, n) < 0;
        Py_XDECREF(at);
        Py_XDECREF(n);
        if (failed)
            goto fail;
    }
    goto done;
fail:
    Py_CLEAR(shared);
done:
    PyMem_Free(uses);
    return shared;
}

PyDoc_STRVAR(any_edge_shape_doc,
"any_edge_shape(links)\n"
"--\n\n"
"Whether any link's rest holds a shape (rest[1] is not None).");

static PyObject *
any_edge_shape(PyObject *module, PyObject *links)
{
    Py_ssize_t count = link_count(links);
    if (count < 0)
        return NULL;
    for (Py_ssize_t i = 0; i < count; i++) {
        Py_ssize_t source, target;
        PyObject *rest;
        if (link_at(links, i, &source, &target, &rest) < 0)
            return NULL;
        if (!PyTuple_Check(rest) || PyTuple_GET_SIZE(rest) < 2) {
            PyErr_SetString(PyExc_TypeError, "a link is not (source, target, (kind, shape, ...))");
            return NULL;
        }
        if (PyTuple_GET_ITEM(rest, 1) != Py_None)
            Py_RETURN_TRUE;
    }
    Py_RETURN_FALSE;
}


/* The length of "n<i>", a walked graph's id of node i. */
static Py_ssize_t
numbered_id_length(Py_ssize_t i)
{
    Py_ssize_t length = 2;
    for (; i >= 10; i /= 10)
        length++;
    return length;
}

/* The length of node i's id, from ``ids`` or numbered when ``ids`` is None. */
static Py_ssize_t
id_length(PyObject *ids, Py_ssize_t i, Py_UCS4 *widest)
{
    return ids == Py_None ? numbered_id_length(i) : measure(PyList_GET_ITEM(ids, i), widest);
}

static inline int
put_id(Out *out, PyObject *ids, Py_ssize_t i)
{
    if (ids != Py_None) {
        if (i >= PyList_GET_SIZE(ids)) {
            PyErr_SetString(PyExc_RuntimeError, "the ids changed while the DOT was written");
            return -1;
        }
        return put(out, PyList_GET_ITEM(ids, i));
    }
    char id[24]; /* "n" and the digits of i, written from the end */
    char *start = id + sizeof id;
    do {
        *--start = (char)('0' + i % 10);
        i /= 10;
    } while (i > 0);
    *--start = 'n';
    return put_ascii(out, start, id + sizeof id - start);
}

PyDoc_STRVAR(dot_text_doc,
"dot_text(before, ids, contents, links, lookup, line_ends, after)\n"
"--\n\n"
"One str: the pieces of ``before``, node_text's lines of every node (with\n"
"``lookup`` as node_text takes it), edge_text's\n"
"lines of every link, then the pieces of ``after``. Written in place, in two\n"
"passes (sizes, then text), without a str per line or per run of lines, and\n"
"never copied after. ``ids`` None stands for n0, n1, ... (a walked graph's).");

static PyObject *
dot_text(PyObject *module, PyObject *args)
{
    PyObject *before, *ids, *contents, *links, *lookup_tuple, *line_ends, *after;
    Lookup lookup;
    if (!PyArg_ParseTuple(args, "O!OO!OO!O!O!:dot_text", &PyList_Type, &before, &ids, &PyList_Type, &contents,
                          &links, &PyTuple_Type, &lookup_tuple, &PyDict_Type, &line_ends,
                          &PyList_Type, &after)
        || !read_lookup(lookup_tuple, &lookup))
        return NULL;
    if (ids != Py_None && !PyList_Check(ids)) {
        PyErr_SetString(PyExc_TypeError, "ids must be a list or None");
        return NULL;
    }
    Py_ssize_t node_count = PyList_GET_SIZE(contents);
    Py_ssize_t links_count = link_count(links);
    if (links_count < 0)
        return NULL;
    Py_ssize_t id_count = ids == Py_None ? node_count : PyList_GET_SIZE(ids);
    if (node_count > id_count) {
        PyErr_SetString(PyExc_IndexError, "a node has no id");
        return NULL;
    }
    /* Each node's attributes, and each link's (source, target, end): owned or borrowed
     * from lists and dicts that nothing changes meanwhile (line_ends, ids, links). */
    PyObject **attrs = PyMem_Calloc(node_count > 0 ? node_count : 1, sizeof(PyObject *));
    PyObject **ends = PyMem_Calloc(links_count > 0 ? links_count : 1, sizeof(PyObject *));
    Py_ssize_t *ends_at = PyMem_Calloc(links_count > 0 ? 2 * links_count : 1, sizeof(Py_ssize_t));
    PyObject *out = NULL;
    MetTable met = {NULL, 0, 0};
    if (attrs == NULL || ends == NULL || ends_at == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    if (met_init(&met) < 0)
        goto done;
    Py_UCS4 widest = 127;
    Py_ssize_t total = measure_list(before, &widest), length;
    if (total < 0)
        goto done;
    for (Py_ssize_t i = 0; i < node_count; i++) {
        if (interrupted(i + 1))
            goto done;
        if (i >= PyList_GET_SIZE(contents) || (ids != Py_None && i >= PyList_GET_SIZE(ids))) { /* miss() runs Python code */
            PyErr_SetString(PyExc_RuntimeError, "the nodes changed while the DOT was written");
            goto done;
        }
        if ((attrs[i] = drawn_attrs(&lookup, &met, contents, i)) == NULL)
            goto done;
        Py_ssize_t node_id_length = id_length(ids, i, &widest);
        if (node_id_length < 0 || (length = measure(attrs[i], &widest)) < 0)
            goto done;
        total += 3 + node_id_length + length; /* tab, space, line break */
    }
    if (PyList_GET_SIZE(contents) != node_count || (ids != Py_None && PyList_GET_SIZE(ids) != id_count)) {
        PyErr_SetString(PyExc_RuntimeError, "the ids changed while the DOT was written");
        goto done;
    }
    LastEnd last = {NULL, NULL};
    for (Py_ssize_t i = 0; i < links_count; i++) {
        Py_ssize_t source, target;
        PyObject *end;
        if (interrupted(i + 1)
            || read_link(links, i, id_count, line_ends, &last, &source, &target, &end) < 0)
            goto done;
        Py_ssize_t source_length = id_length(ids, source, &widest);
        Py_ssize_t target_length = id_length(ids, target, &widest);
        if (source_length < 0 || target_length < 0 || (length = measure(end, &widest)) < 0)
            goto done;
        Py_INCREF(end);
        ends[i] = end;
        ends_at[2 * i] = source;
        ends_at[2 * i + 1] = target;
        total += 5 + source_length + target_length + length; /* tab, " -> " */
    }
    if ((length = measure_list(after, &widest)) < 0)
        goto done;
    total += length;

    if ((out = PyUnicode_New(total, widest)) == NULL)
        goto done;
    Out o = {out, PyUnicode_KIND(out), PyUnicode_DATA(out), 0, total};
    if (put_list(&o, before) < 0)
        goto fail;
    for (Py_ssize_t i = 0; i < node_count; i++) {
        if (put_ascii(&o, "\t", 1) < 0 || put_id(&o, ids, i) < 0 || put_ascii(&o, " ", 1) < 0
            || put(&o, attrs[i]) < 0 || put_ascii(&o, "\n", 1) < 0)
            goto fail;
    }
    for (Py_ssize_t i = 0; i < links_count; i++) {
        if (put_ascii(&o, "\t", 1) < 0 || put_id(&o, ids, ends_at[2 * i]) < 0 || put_ascii(&o, " -> ", 4) < 0
            || put_id(&o, ids, ends_at[2 * i + 1]) < 0 || put(&o, ends[i]) < 0)
            goto fail;
    }
    if (put_list(&o, after) < 0)
        goto fail;
    if (o.at != total) {
        PyErr_SetString(PyExc_RuntimeError, "the DOT text came out of another length than measured");
        goto fail;
    }
    goto done;
fail:
    Py_CLEAR(out);
done:
    if (attrs != NULL) {
        for (Py_ssize_t i = 0; i < node_count; i++)
            Py_XDECREF(attrs[i]);
    }
    if (ends != NULL) {
        for (Py_ssize_t i = 0; i < links_count; i++)
            Py_XDECREF(ends[i]);
    }
    met_free(&met);
    PyMem_Free(attrs);
    PyMem_Free(ends);
    PyMem_Free(ends_at);
    return out;
}

PyDoc_STRVAR(parameter_names_doc,
"parameter_names(params, tensor_type)\n"
"--\n\n"
"walk._parameter_names of a dict of str to tensor_type: id(tensor) -> name,\n"
"the first name of a tensor kept. None when a key is not a str or a value is\n"
"not a tensor_type (the Python loop then says what is wrong).");

static PyObject *
parameter_names(PyObject *module, PyObject *args)
{
    PyObject *params, *tensor_type, *name, *tensor;
    if (!PyArg_ParseTuple(args, "O!O!:parameter_names", &PyDict_Type, &params, &PyType_Type, &tensor_type))
        return NULL;
    PyObject *names = PyDict_New();
    if (names == NULL)
        return NULL;
    /* Nothing below runs Python code, so params cannot change while it is read. */
    for (Py_ssize_t at = 0; PyDict_Next(params, &at, &name, &tensor);) {
        if (!PyUnicode_CheckExact(name) || !PyObject_TypeCheck(tensor, (PyTypeObject *)tensor_type)) {
            Py_DECREF(names);
            Py_RETURN_NONE;
        }
        PyObject *key = PyLong_FromVoidPtr(tensor);
        if (key == NULL || PyDict_SetDefault(names, key, name) == NULL) {
            Py_XDECREF(key);
            Py_DECREF(names);
            return NULL;
        }
        Py_DECREF(key);
    }
    return names;
}

static PyMethodDef methods[] = {
    {"dot_text", dot_text, METH_VARARGS, dot_text_doc},
    {"shared_sources", shared_sources, METH_VARARGS, shared_sources_doc},
    {"any_edge_shape", any_edge_shape, METH_O, any_edge_shape_doc},
    {"drain", drain, METH_VARARGS, drain_doc},
    {"parameter_names", parameter_names, METH_VARARGS, parameter_names_doc},
    {"node_text", node_text, METH_VARARGS, node_text_doc},
    {"edge_text", edge_text, METH_VARARGS, edge_text_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef speedups_module = {
    PyModuleDef_HEAD_INIT,
    "graphviz_autograd._speedups",
    "The walk's and the DOT writer's hot loops in C (see speedups.py).",
    -1,
    methods,
};

static PyObject *
intern(const char *text)
{
    return PyUnicode_InternFromString(text);
}

PyMODINIT_FUNC
PyInit__speedups(void)
{
    if ((str_next_functions = intern("next_functions")) == NULL
        || (str_content_of = intern("content_of")) == NULL
        || (str_variable = intern("variable")) == NULL
        || (str_shape = intern("shape")) == NULL
        || (str_dtype = intern("dtype")) == NULL
        || (str_device = intern("device")) == NULL
        || (str_tab = intern("\t")) == NULL
        || (str_space = intern(" ")) == NULL
        || (str_newline = intern("\n")) == NULL
        || (str_arrow = intern(" -> ")) == NULL
        || (str_empty = intern("")) == NULL
        || (empty_tuple = PyTuple_New(0)) == NULL
        || PyType_Ready(&Links_Type) < 0)
        return NULL;
    if (PyType_Ready(&LinksIterator_Type) < 0)
        return NULL;
    PyObject *module = PyModule_Create(&speedups_module);
    if (module == NULL)
        return NULL;
    Py_INCREF(&Links_Type);
    if (PyModule_AddObject(module, "Links", (PyObject *)&Links_Type) < 0) {
        Py_DECREF(&Links_Type);
        Py_DECREF(module);
        return NULL;
    }
    return module;
}
